"""Child side: import a Triton candidate from its file with a private Triton cache; classify its faults.

Runs inside the isolated candidate child, so it imports only the standard library: triton and torch come in
when the candidate's own `import` statements run. Never import this module's callers' heavy dependencies
(pydantic, ptxcore.schema) from here.

    os.environ.update(triton_env(scratch))           # before anything imports triton
    candidate = load_candidate(scratch / "kernel.py", cache_dir=scratch / "triton-cache")
    try:
        candidate.run(*args)                          # the first call JIT-compiles (seconds)
    except Exception as exc:
        fault = classify_fault(exc, candidate.path)   # COMPILE_ERROR or RUNTIME_ERROR, trimmed, no host paths

The module runs with its own builtins (`candidate_builtins`): the validator's allowed names and an `__import__`
that admits only the allowed modules. The static validator is the rule; this is a second wall for a route it
might miss at import time (`exec`, `open`, `getattr`, `__import__('os')` and anything reached through the
module's `__builtins__` - e.g. a jit function's capture scope - simply are not there).

Triton raises its compile errors at the first launch (`CompilationError` from the front end, `PTXASError`,
`OutOfResources` when the compiled kernel needs more shared memory or threads than the GPU has, or an MLIR
pass failure raised from `triton.compiler`); all of those are COMPILE_ERROR, everything else RUNTIME_ERROR.
"""

from __future__ import annotations

import builtins
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .rules import ALLOWED_BUILTINS, ALLOWED_IMPORTS

CANDIDATE_MODULE = "ptxbench_triton_candidate"
"""Module name the candidate is imported under (never "__main__", so its main guard never runs)."""
COMPILE_ERROR, RUNTIME_ERROR = "COMPILE_ERROR", "RUNTIME_ERROR"
MAX_MESSAGE_CHARS = 2000
_COMPILE_ERROR_TYPES = frozenset({"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                                  "PTXASError", "OutOfResources"})
_COMPILER_FILES = ("triton/compiler/", "triton/backends/")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)")


class CandidateLoadError(RuntimeError):
    """The candidate module did not import or has no callable `run`."""

    def __init__(self, fault: CandidateFault) -> None:
        super().__init__(fault.message)
        self.fault = fault


@dataclass(frozen=True)
class CandidateFault:
    """A candidate failure as the judge reports it."""

    status: str
    """COMPILE_ERROR or RUNTIME_ERROR (EvaluationStatus values)."""
    message: str
    """One trimmed message: exception type and text, then the candidate's own frames; no host paths."""


@dataclass(frozen=True)
class LoadedCandidate:
    """An imported kernel.py."""

    run: Callable
    """The candidate's destination-passing entry point."""
    path: Path
    """The file it was imported from."""
    cache_dir: Path
    """Its private Triton cache (compiled kernels land in <cache_dir>/<hash>/<name>.cubin)."""


def triton_env(scratch: Path, cache_dir: Path | None = None) -> dict[str, str]:
    """Environment for a candidate child: every Triton directory inside its scratch, autotuning results cached
    there too (so Nsight Compute's application replays pick the same configuration every pass)."""
    cache = cache_dir or scratch / "triton-cache"
    return {
        "TRITON_CACHE_DIR": str(cache), "TRITON_HOME": str(scratch),
        "TRITON_DUMP_DIR": str(scratch / "triton-dump"), "TRITON_OVERRIDE_DIR": str(scratch / "triton-override"),
        "TRITON_CACHE_AUTOTUNING": "1",
    }


def configure_cache(cache_dir: Path) -> None:
    """Point Triton at `cache_dir`, whether or not triton is imported already (its knobs read the environment)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update(triton_env(cache_dir.parent, cache_dir))
    knobs = sys.modules.get("triton.knobs")
    if knobs is not None:  # an earlier import may have cached the old value in a knob override
        knobs.cache.dir = str(cache_dir)


def _candidate_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s own names
    """`__import__` for a candidate: absolute imports of ALLOWED_IMPORTS only."""
    if level != 0 or name not in ALLOWED_IMPORTS:
        raise ImportError(f"a candidate may not import {name!r}")
    return builtins.__import__(name, globals, locals, fromlist, level)


def candidate_builtins() -> dict[str, object]:
    """The `__builtins__` a candidate module runs with (and every function it defines, its jit functions'
    capture scopes included): the allowed builtins and a guarded `__import__`, nothing else."""
    table: dict[str, object] = {name: getattr(builtins, name) for name in ALLOWED_BUILTINS if hasattr(builtins, name)}
    table["__import__"] = _candidate_import
    return table


def load_candidate(path: Path, cache_dir: Path) -> LoadedCandidate:
    """Import kernel.py under a private module name; raise CandidateLoadError with a classified fault."""
    configure_cache(cache_dir)
    sys.modules.pop(CANDIDATE_MODULE, None)
    spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, path)
    if spec is None or spec.loader is None:
        raise CandidateLoadError(CandidateFault(RUNTIME_ERROR, f"cannot import {path.name}"))
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__builtins__"] = candidate_builtins()  # exec keeps a __builtins__ already present
    sys.modules[CANDIDATE_MODULE] = module  # Triton's jit reads the source back through the module's file
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the candidate's fault
        sys.modules.pop(CANDIDATE_MODULE, None)
        raise CandidateLoadError(classify_fault(exc, path, during="import")) from exc
    run = module.__dict__.get("run")
    if not callable(run):
        raise CandidateLoadError(CandidateFault(RUNTIME_ERROR, f"{path.name} defines no callable `run`"))
    return LoadedCandidate(run=run, path=path, cache_dir=cache_dir)


def classify_fault(exc: BaseException, path: Path, during: str = "call") -> CandidateFault:
    """COMPILE_ERROR for Triton's compile-time failures, RUNTIME_ERROR otherwise; message scrubbed of paths."""
    status = COMPILE_ERROR if _is_compile_error(exc) else RUNTIME_ERROR
    head = f"{type(exc).__name__}: {exc}".strip()
    frames = candidate_frames(exc, path)
    text = head if not frames else f"{head}\n{frames}"
    prefix = "Triton compilation failed" if status == COMPILE_ERROR else f"error during {during}"
    return CandidateFault(status, trim_message(f"{prefix}: {text}", path.parent))


def _is_compile_error(exc: BaseException) -> bool:
    for cls in type(exc).__mro__:
        if cls.__name__ in _COMPILE_ERROR_TYPES and cls.__module__.startswith("triton"):
            return True
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        tb = tb.tb_next
    return last is not None and any(part in last for part in _COMPILER_FILES)


def candidate_frames(exc: BaseException, path: Path, limit: int = 6) -> str:
    """The traceback frames that belong to kernel.py, innermost last: `kernel.py:LINE in FUNC: code`."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name == path.name
              and Path(f.filename).parent == path.parent]
    return "\n".join(f"  {path.name}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames[-limit:])


def trim_message(text: str, *roots: Path) -> str:
    """Drop ANSI colours and host paths (known roots removed, other absolute paths cut to their file name)."""
    text = _ANSI.sub("", text)
    for root in roots:
        text = text.replace(str(root) + os.sep, "").replace(str(root), ".")
    text = _ABS_PATH.sub(lambda m: m.group(1), text)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 15] + " ... (trimmed)"
    return text
