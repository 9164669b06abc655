"""One sandboxed nvcc build and its gate: what the preprocessor opened, what nvcc's later passes would read
(cudafe++ and cicc preprocess the .ii again, gcc compiles cudafe++'s output) and what reaches the assembler
decide REJECTED before any of the build's output (log or artifact) is used. A successful build's object is copied
out before the gate so that its device code can be read meanwhile (`on_object`, ptxcore.compile.devicecode); a
refused build's copy is removed and what was read of it dropped. With nvcc's two chains the per-pass checks start
while nvcc still runs, on each pass once its step is over, and count only for the very text the gate reads after
the build (ptxcore.compile.early)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ptxcore.sandbox import Sandbox, SandboxOutcome, SandboxStatus
from ptxcore.schema import CompileStatus, SandboxMode

from .early import STEPS_NAME, EarlyChecks, PassCheck, check_pass, merged_dependencies
from .includes import PASS_FILES, SOURCE_NAME, Dependency, check_generated, check_log, read_passes
from .nvcc import KEEP_DIR, BuildOptions, nvcc_command, scrub_log
from .plan import dryrun, module_id, script
from .toolchain import SCRATCH, Toolchain, compile_policy

log = logging.getLogger(__name__)

ARTIFACT_NAME = "kernel.so"
_GCC_ERROR = re.compile(r"^[^\n(]*:\d+:\d+: (?:fatal )?error: ", re.M)
MAX_PREPROCESSED_CHARS = 32 << 20
"""Largest preprocessed text (both passes) the gate reads; the paper's kernels give about 2.5 MB."""


@dataclass(frozen=True)
class BuildOutcome:
    """What one sandboxed build established."""

    status: CompileStatus
    reason: str
    """One line: why rejected or what failed ("" when compiled)."""
    log: str
    """The scrubbed compiler output ("" when rejected: a rejected build's output is never shown)."""
    artifact: Path | None
    """The shared object copied out of the sandbox (in the caller's staging directory)."""
    deps: list[Dependency]
    """Files the build entered (content hashes); empty when a pass did not complete."""
    cacheable: bool
    """Deterministic given the inputs: both passes' dependencies are known and no limit or deadline hit."""
    duration_s: float
    mode: SandboxMode

    def __post_init__(self) -> None:
        if (self.status is CompileStatus.COMPILED) != (self.artifact is not None):
            raise ValueError("an artifact exactly when compiled")
        if self.status is CompileStatus.COMPILED and not self.cacheable:
            raise ValueError("a compiled build has both passes checked, so it is cacheable")


def _copy_out(src: Path, dest: Path) -> bool:
    """Copy a regular file out of the sandbox without following links; False when it is not one."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            return False
        with open(dest, "wb") as fout:
            shutil.copyfileobj(fin, fout)
    return True


def _gate(checks: dict[str, PassCheck], outcome: SandboxOutcome, tc: Toolchain, keep_dir: Path) -> str | None:
    """The rejection reason of a build, or None: per pass (`checks`, in nvcc's order; ptxcore.compile.early
    .check_pass), every file a marker names, any directive a later pass would obey, file-embedding assembler
    text; then what the last gcc pass includes, then the log."""
    for check in checks.values():
        if check.reason is not None:
            return check.reason
    return (check_generated(keep_dir, tc.include_roots, MAX_PREPROCESSED_CHARS, failed=not outcome.ok)
            or check_log(outcome.output, tc.include_roots))


def _failure_reason(outcome: SandboxOutcome, options: BuildOptions) -> str:
    if outcome.status is SandboxStatus.TIMED_OUT:
        return f"compile timed out after {options.timeout_s:.0f} s"
    if outcome.status is SandboxStatus.SIGNALED:
        return (f"the compiler was killed by signal {outcome.signal} (a build limit: memory "
                f"{options.memory_limit_bytes >> 20} MiB, file size or CPU time)")
    return "nvcc failed"


def sandboxed_build(source: str, options: BuildOptions, tc: Toolchain, staging: Path, timeout_s: float,
                    on_object: Callable[[Path], None] | None = None,
                    on_fatbin: Callable[[Path], None] | None = None) -> BuildOutcome:
    """Build `source` in a fresh sandbox; the artifact (if any) lands in `staging`. `on_object` is called with
    the copied-out object of a build that succeeded, before the gate judges it (to start reading its device
    code); the object is removed again when the gate refuses the build. `on_fatbin` is called, while the build
    still runs, with the kernel's fatbinary in the keep folder once nvcc's step that makes it has exited 0 (two
    chains only; ptxcore.compile.early)."""
    policy = compile_policy(tc, options.timeout_s, options.memory_limit_bytes)
    with Sandbox(policy) as box:
        (box.scratch / SOURCE_NAME).write_text(source)
        os.utime(box.scratch / SOURCE_NAME, (0, 0))  # -lineinfo records the mtime: reproducible device code
        (box.scratch / KEEP_DIR).mkdir()
        for path in (box.scratch / SOURCE_NAME, box.scratch / KEEP_DIR):
            box.give(path)
        cmd = nvcc_command(box.inside(SOURCE_NAME), box.inside(ARTIFACT_NAME), box.inside(KEEP_DIR), options, tc)
        plan = dryrun(tuple(cmd), policy.env["PATH"]) if options.two_chains else None
        host = str(box.scratch) + "/"

        def at_sandbox_paths(text: str) -> str:  # an unsandboxed build, as if it had run at the sandbox's paths
            return text.replace(host, SCRATCH + "/") if box.mode is SandboxMode.UNSANDBOXED else text

        early = None
        if plan is not None:  # nvcc's own steps, its two chains at once; its log and status
            cmd = ["/bin/bash", "-c", script(plan, module_id(box.inside(SOURCE_NAME)), box.inside(KEEP_DIR),
                                             box.inside(STEPS_NAME))]
            early = EarlyChecks(box.scratch / KEEP_DIR, box.scratch / STEPS_NAME, plan, box.inside(KEEP_DIR),
                                tc.include_roots, MAX_PREPROCESSED_CHARS, at_sandbox_paths, on_fatbin)
        with early if early is not None else contextlib.nullcontext():
            outcome = box.run(cmd, timeout_s=max(timeout_s, 1.0))
        passes, oversize = read_passes(box.scratch / KEEP_DIR, MAX_PREPROCESSED_CHARS)
        if oversize:
            return _oversize(outcome, options)
        passes = {k: at_sandbox_paths(v) for k, v in passes.items()}
        outcome = outcome.model_copy(update={"stdout": at_sandbox_paths(outcome.stdout),
                                             "stderr": at_sandbox_paths(outcome.stderr)})
        checks = {name: (early.check(name, text) if early is not None else None)
                  or check_pass(text, tc.include_roots) for name, text in passes.items()}
        return _judge(outcome, checks, options, tc, box.scratch, staging, on_object)


def _oversize(outcome: SandboxOutcome, options: BuildOptions) -> BuildOutcome:
    """A preprocessed pass too large to check: a preprocessor bomb. Nothing of the build is shown."""
    common = {"log": "", "artifact": None, "deps": [], "duration_s": outcome.duration_s, "mode": outcome.mode}
    if outcome.status is not SandboxStatus.EXITED:
        return BuildOutcome(CompileStatus.COMPILE_ERROR, _failure_reason(outcome, options), cacheable=False,
                            **common)
    return BuildOutcome(CompileStatus.REJECTED, f"preprocessed source exceeds {MAX_PREPROCESSED_CHARS} bytes",
                        cacheable=False, **common)


def _deterministic(outcome: SandboxOutcome, passes: dict[str, str]) -> bool:
    """The outcome follows from the source and the entered headers alone: it exited by itself, and every
    preprocessing pass that ran completed (both; or the host pass, then nvcc's front end stopped before the
    device pass - a gcc error in the log means the device pass failed instead, on a header we cannot see)."""
    if outcome.status is not SandboxStatus.EXITED:
        return False
    if len(passes) == 2:
        return True
    return list(passes) == [PASS_FILES[0]] and not _GCC_ERROR.search(outcome.output)


def _judge(outcome: SandboxOutcome, checks: dict[str, PassCheck], options: BuildOptions, tc: Toolchain,
           scratch: Path, staging: Path, on_object: Callable[[Path], None] | None) -> BuildOutcome:
    passes = {name: check.text for name, check in checks.items()}
    cacheable = _deterministic(outcome, passes)
    deps = merged_dependencies(checks.values()) if cacheable and checks else []
    common = {"deps": deps, "duration_s": outcome.duration_s, "mode": outcome.mode}
    artifact = staging / ARTIFACT_NAME
    copied = outcome.ok and len(passes) == 2 and _copy_out(scratch / ARTIFACT_NAME, artifact)
    if copied and on_object is not None:
        on_object(artifact)  # read while the gate runs; used only when the build is COMPILED
    reason = _gate(checks, outcome, tc, scratch / KEEP_DIR)
    if reason is not None or not copied:
        artifact.unlink(missing_ok=True)
    if reason is not None:
        return BuildOutcome(CompileStatus.REJECTED, reason, "", None, cacheable=cacheable, **common)
    if not outcome.ok:
        return BuildOutcome(CompileStatus.COMPILE_ERROR, _failure_reason(outcome, options),
                            scrub_log(outcome.output, tc), None, cacheable=cacheable, **common)
    if len(passes) != 2:
        return BuildOutcome(CompileStatus.COMPILE_ERROR, "the build left no preprocessed passes to check",
                            "", None, cacheable=False, **common)
    if not copied:
        return BuildOutcome(CompileStatus.COMPILE_ERROR, "nvcc produced no shared object",
                            scrub_log(outcome.output, tc), None, cacheable=False, **common)
    return BuildOutcome(CompileStatus.COMPILED, "", scrub_log(outcome.output, tc), artifact,
                        cacheable=True, **common)
