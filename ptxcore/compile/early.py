"""The gate's per-pass checks and the kernel's first SASS dump, started while nvcc still runs (issue 27).

The two-chain script (ptxcore.compile.plan) writes each step's exit status to its steps folder in the build's
scratch as the step ends. Once the host preprocessing has exited 0 its pass (kernel.cpp4.ii) is whole, and likewise
the device pass once the device preprocessing has; the checks the gate makes of a pass (the files its markers
name, surviving directives, file-embedding assembler text) and the hashes of the allowed headers it names are
functions of its text alone (the include roots are read-only), so `EarlyChecks` makes them on that text at once,
beside cudafe++ and cicc. Once the device chain's fatbinary step has exited 0 the kernel's fatbinary is handed to
`on_fatbin` (ptxcore.compile.devicecode.DeviceCodeReader.prefetch, which dumps a copy of it).

Only a head start, never a verdict: when the build is over the gate reads the passes again, as it always did, and
uses an early check only for a pass whose final text is the very text checked (compared whole); any other text is
checked then. A failed, missing, oversized or unreadable pass is simply not checked early. The checks run in one
thread of the judge's process, with nothing of the candidate's: nvcc's steps run in the sandbox, and this thread
only reads the files they leave.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType

from .directives import find_embedding, find_surviving_directive
from .includes import PASS_FILES, Dependency, check_entered, dependencies, named_files, read_regular
from .plan import Plan
from .toolchain import IncludeRoot

log = logging.getLogger(__name__)

POLL_S = 0.01
STEPS_NAME = "steps"
"""The two-chain script's steps folder, in the build's scratch (plan.STEP_LOGS)."""


@dataclass(frozen=True)
class PassCheck:
    """What the gate concludes from one preprocessed pass: the files its markers name, the first rejection
    reason of its own checks (None: none), and the allowed headers it names, hashed."""

    text: str
    named: frozenset[str]
    reason: str | None
    deps: tuple[Dependency, ...]

    def __post_init__(self) -> None:
        if self.reason == "":
            raise ValueError("a pass check's reason is a line or None")


def check_pass(text: str, roots: tuple[IncludeRoot, ...]) -> PassCheck:
    """The gate's checks of one pass (ptxcore.compile.build._gate), in its order."""
    named = named_files(text)
    reason = check_entered(named, roots) or find_surviving_directive(text) or find_embedding(text)
    return PassCheck(text, frozenset(named), reason, tuple(dependencies(named, roots)))


def merged_dependencies(checks: Iterable[PassCheck]) -> list[Dependency]:
    """`dependencies` of the union of the passes' names: each name's entry depends on that name alone."""
    by_path = {d.path: d for check in checks for d in check.deps}
    return sorted(by_path.values(), key=lambda d: (d.root, d.relative))


class EarlyChecks:
    """Watches a two-chain build's steps folder and checks each pass (and hands on the fatbinary) once its step
    has exited 0; use as a context manager around the build's run."""

    def __init__(self, keep_dir: Path, steps_dir: Path, plan: Plan, keep_inside: str,
                 roots: tuple[IncludeRoot, ...], max_chars: int, rewrite: Callable[[str], str] = lambda t: t,
                 on_fatbin: Callable[[Path], None] | None = None, poll_s: float = POLL_S) -> None:
        self._keep, self._steps, self._roots, self._max = keep_dir, steps_dir, roots, max_chars
        self._rewrite, self._poll = rewrite, poll_s
        host_step, device_step = plan.pass_steps()
        self._pending: dict[int, Callable[[], None]] = {
            host_step: lambda: self._check(PASS_FILES[0]),
            device_step: lambda: self._check(PASS_FILES[1]),
        }
        fat_step, created = plan.fatbinary_step()
        if on_fatbin is not None and created is not None and str(PurePosixPath(created).parent) == keep_inside:
            self._pending[fat_step] = lambda: on_fatbin(keep_dir / PurePosixPath(created).name)
        self._checks: dict[str, PassCheck] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="early-gate", daemon=True)

    def check(self, name: str, text: str) -> PassCheck | None:
        """The early check of pass `name` when it was made on exactly `text`, else None."""
        found = self._checks.get(name)
        return found if found is not None and found.text == text else None

    def _status(self, step: int) -> str | None:
        try:
            return (self._steps / f"{step}.rc").read_text().strip() or None
        except OSError:
            return None

    def _check(self, name: str) -> None:
        text, _oversize = read_regular(self._keep / name, self._max)
        if text is not None:
            self._checks[name] = check_pass(self._rewrite(text), self._roots)

    def _watch(self) -> None:
        while self._pending and not self._stop.is_set():
            for step in sorted(self._pending):
                status = self._status(step)
                if status is None:
                    continue
                action = self._pending.pop(step)
                if status != "0":
                    continue  # the step failed: nothing of it to check ahead
                try:
                    action()
                except Exception:  # a head start that fails is no head start; the gate decides as before
                    log.exception("early check of step %d failed; the gate checks it after the build", step)
            self._stop.wait(self._poll)

    def __enter__(self) -> EarlyChecks:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
