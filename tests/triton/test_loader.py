"""Child-side loader: private module name and cache, classified faults with no host paths."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptxcore.triton.loader import (
    CANDIDATE_MODULE,
    COMPILE_ERROR,
    RUNTIME_ERROR,
    CandidateLoadError,
    classify_fault,
    load_candidate,
    trim_message,
    triton_env,
)

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "kernel.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_loads_run_under_a_private_name_and_skips_the_main_guard(tmp_path):
    path = write(tmp_path, """
        CALLS = []
        def run(x, y):
            CALLS.append((x, y))
        if __name__ == "__main__":
            raise SystemExit("the main guard must not run on import")
    """)
    cand = load_candidate(path, tmp_path / "cache")
    cand.run(1, 2)
    assert sys.modules[CANDIDATE_MODULE].CALLS == [(1, 2)]
    assert cand.cache_dir == tmp_path / "cache" and cand.cache_dir.is_dir()
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "cache")


def test_import_error_is_a_runtime_error_with_the_candidate_line_and_no_paths(tmp_path):
    path = write(tmp_path, """
        def helper():
            raise ValueError("bad value at " + __file__)
        helper()
        def run():
            pass
    """)
    with pytest.raises(CandidateLoadError) as info:
        load_candidate(path, tmp_path / "cache")
    fault = info.value.fault
    assert fault.status == RUNTIME_ERROR
    assert "ValueError: bad value at kernel.py" in fault.message
    assert "kernel.py:3 in helper" in fault.message and "error during import" in fault.message
    assert str(tmp_path) not in fault.message
    assert CANDIDATE_MODULE not in sys.modules


def test_missing_run_is_refused(tmp_path):
    with pytest.raises(CandidateLoadError, match="no callable `run`"):
        load_candidate(write(tmp_path, "run = 3\n"), tmp_path / "cache")


def test_triton_env_keeps_every_directory_in_the_scratch(tmp_path):
    env = triton_env(tmp_path)
    for key in ("TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR"):
        assert Path(env[key]).is_relative_to(tmp_path), key
    assert env["TRITON_CACHE_AUTOTUNING"] == "1"


def test_trim_message_removes_host_paths_and_colours(tmp_path):
    text = (f"\x1b[31merror\x1b[0m in {tmp_path}/kernel.py and "
            "/usr/lib/python3.11/site-packages/triton/language/core.py line 5")
    out = trim_message(text, tmp_path)
    assert out == "error in kernel.py and core.py line 5"
    assert len(trim_message("x" * 10_000)) <= 2000


def test_runtime_error_raised_inside_triton_compiler_counts_as_compile_error(tmp_path):
    # An MLIR pass failure surfaces as a plain RuntimeError raised from triton/compiler/compiler.py.
    fake = tmp_path / "site" / "triton" / "compiler" / "compiler.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("def compile():\n    raise RuntimeError('PassManager::run failed')\n")
    ns: dict = {}
    exec(compile(fake.read_text(), str(fake), "exec"), ns)  # noqa: S102 - builds a frame with that file name
    try:
        ns["compile"]()
    except RuntimeError as exc:
        fault = classify_fault(exc, tmp_path / "kernel.py")
    assert fault.status == COMPILE_ERROR and "PassManager::run failed" in fault.message
    plain = classify_fault(RuntimeError("CUDA error: an illegal memory access"), tmp_path / "kernel.py")
    assert plain.status == RUNTIME_ERROR


def test_triton_compilation_errors_are_compile_errors(tmp_path):
    pytest.importorskip("triton")
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources, PTXASError

    for exc in (OutOfResources(300_000, 232_448, "shared memory"), PTXASError("ptxas fatal"),
                CompilationError("x = 1", None, "boom")):
        fault = classify_fault(exc, tmp_path / "kernel.py")
        assert fault.status == COMPILE_ERROR, type(exc).__name__
        assert fault.message.startswith("Triton compilation failed: ")


def test_a_real_triton_front_end_error_is_classified_with_its_source_line(tmp_path):
    """triton.compile on the CPU (no GPU needed) raises the same CompilationError a first launch would. The
    candidate may not import Triton's compiler, so the test compiles its kernel from outside."""
    pytest.importorskip("triton")
    path = write(tmp_path, """
        import triton
        import triton.language as tl

        @triton.jit
        def bad(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, 3)   # not a power of two
            tl.store(x_ptr + offs, offs)

        def run():
            pass
    """)
    code = ("import sys; from pathlib import Path; from ptxcore.triton.loader import *\n"
            "import triton; from triton.backends.compiler import GPUTarget; from triton.compiler import ASTSource\n"
            f"c = load_candidate(Path({str(path)!r}), Path({str(tmp_path / 'cache')!r}))\n"
            "bad = sys.modules[CANDIDATE_MODULE].bad\n"
            "try:\n    triton.compile(ASTSource(bad, {'x_ptr': '*i32', 'BLOCK': 'constexpr'}, {'BLOCK': 4}), "
            "target=GPUTarget('cuda', 90, 32))\n"
            "except Exception as e:\n    f = classify_fault(e, c.path); print(f.status); print(f.message)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])})
    assert out.returncode == 0, out.stderr[-2000:]
    status, message = out.stdout.split("\n", 1)
    assert status == COMPILE_ERROR, out.stdout
    assert "power of 2" in message or "arange" in message, message
    assert str(tmp_path) not in message


# The module runs with the validator's builtins only: a route the static rules missed still finds nothing.
IMPORT_TIME_ESCAPES = {
    "builtins-dict": "__builtins__['exec']('open(MARK, \"w\")')",
    "function-globals": "def f():\n    pass\nf.__globals__['__builtins__']['exec']('open(MARK, \"w\")')",
    "open": "open(MARK, 'w')",
    "import-os": "import os\nos.close(0)",
    "dunder-import": "__import__('os')",
    "getattr": "getattr(print, '__self__')",
    "relative-import": "from . import sibling",
}


@pytest.mark.parametrize("body", list(IMPORT_TIME_ESCAPES.values()), ids=list(IMPORT_TIME_ESCAPES))
def test_a_candidate_imports_with_the_allowed_builtins_only(body, tmp_path):
    mark = tmp_path / "ran"
    path = write(tmp_path, f"MARK = {str(mark)!r}\n" + body + "\ndef run():\n    pass\n")
    with pytest.raises(CandidateLoadError) as info:
        load_candidate(path, tmp_path / "cache")
    assert info.value.fault.status == RUNTIME_ERROR and "error during import" in info.value.fault.message
    assert not mark.exists()


def test_allowed_builtins_and_imports_still_work(tmp_path):
    path = write(tmp_path, """
        import math
        import typing
        SIZES = sorted({min(4, 8), max(1, 2), abs(-3), len([1, 2]), int(2.0)})

        def run(out):
            for i, s in enumerate(zip(SIZES, range(3))):
                out.append((i, s, isinstance(s, tuple), round(math.sqrt(16.0)), str(typing.Optional is not None)))
            print("run ran")
    """)
    out: list = []
    load_candidate(path, tmp_path / "cache").run(out)
    assert out[0] == (0, (2, 0), True, 4, "True") and len(out) == 3


def test_a_jit_functions_capture_scope_holds_no_exec(tmp_path):
    """The route found in issue 26: `jit_fn.get_capture_scope()` is the module's globals."""
    pytest.importorskip("triton")
    mark = tmp_path / "ran"
    path = write(tmp_path, f"""
        import triton
        import triton.language as tl

        @triton.jit
        def k(p):
            tl.store(p, tl.load(p))

        k.get_capture_scope()["__builtins__"]["exec"]("open({str(mark)!r}, 'w')")

        def run():
            pass
    """)
    code = ("from pathlib import Path; from ptxcore.triton.loader import *\n"
            f"try:\n    load_candidate(Path({str(path)!r}), Path({str(tmp_path / 'cache')!r}))\n"
            "except CandidateLoadError as e:\n    print(e.fault.status, e.fault.message.splitlines()[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith(RUNTIME_ERROR) and "KeyError: 'exec'" in out.stdout, out.stdout
    assert not mark.exists()


def test_child_side_modules_import_without_pydantic_or_triton():
    code = ("import sys\nfor m in ('pydantic', 'triton', 'torch', 'cupy'):\n    sys.modules[m] = None\n"
            "import ptxcore.triton.session, ptxcore.triton.loader, ptxcore.triton.launches\nprint('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
