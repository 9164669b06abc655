"""The feedback message of one turn (docs/architecture.md, "Feedback to the model").

Status; compiler or runtime errors (trimmed); the ptxas register / shared-memory / spill report; max
abs/rel error for wrong results; latency and speedup for correct ones; whether the target instructions
were found. A verdict reused from a recorded GPU judgement says so, with the GPU, driver and date. It is
built only from the compile result and the judge envelope, so it cannot carry the reference
implementation's source; seed values that a judge log might mention are redacted. It carries no traceback of
ours and no host path (`clean_log`): a runtime error reaches the model as its message (and the lines of its own
kernel.cu the error passed through), never as the judge's Python stack.
"""

from __future__ import annotations

import re

from ptxcore.schema import (
    CompileResult,
    CompileStatus,
    EvaluationStatus,
    PtxasResources,
    RecordedVerdict,
    StaticTarget,
    TargetInstruction,
)

from .types import TurnEvaluation

LOG_LIMIT_CHARS = 4000
_SEED = re.compile(r"(?i)\b(seed)(\s*[=:]\s*|\s+)(-?\d+)")
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<where>.*))?$')
_ABS_PATH = re.compile(r"(?<![\w.~-])/(?:[\w.+@-]+/)+(?P<name>[\w.+@-]+)")

RECORDED_MARK = " (recorded)"
"""Appended to a number's line when it comes from a recorded judgement."""

_TARGET_TEXT = {
    TargetInstruction.EXECUTED: "executed (verified with Nsight Compute)",
    TargetInstruction.NOT_EXECUTED: "present in the binary but NOT executed",
    TargetInstruction.ABSENT: "NOT found in the binary",
    TargetInstruction.UNKNOWN: "unknown",
}


def _compact_tracebacks(lines: list[str]) -> list[str]:
    """Python tracebacks -> their closing exception line, keeping only frames in the candidate's own .cu file."""
    out, inside = [], False
    for line in lines:
        if line.strip() == _TRACEBACK:
            inside = True
            continue
        if inside:
            frame = _FRAME.match(line)
            if frame:
                if frame.group("file").endswith(".cu"):
                    name = frame.group("file").rsplit("/", 1)[-1]
                    out.append(f"  at {name} line {frame.group('line')}" + (f", in {frame.group('where')}"
                                                                              if frame.group("where") else ""))
                continue
            if line.startswith((" ", "\t")):  # a frame's source line or its ^^^ marker
                continue
            inside = False
        out.append(line)
    return out


def clean_log(text: str) -> str:
    """Model-facing log text: our tracebacks compacted to their message, absolute paths cut to the file name."""
    lines = _compact_tracebacks((text or "").splitlines())
    return "\n".join(_ABS_PATH.sub(lambda m: m.group("name"), line) for line in lines)


def trim(text: str, limit: int = LOG_LIMIT_CHARS) -> str:
    """Keep the head (first errors matter most), drop blank lines, redact seeds, clean tracebacks and paths."""
    text = clean_log(_SEED.sub(lambda m: f"{m.group(1)}=<hidden>", text or ""))
    text = "\n".join(ln.rstrip() for ln in text.splitlines() if ln.strip())
    if len(text) > limit:
        text = text[:limit] + f"\n... [{len(text) - limit} more characters trimmed]"
    return text


def resources_lines(resources: PtxasResources) -> list[str]:
    lines = []
    for k in resources.kernels:
        lines.append(
            f"  {k.function}: {k.registers} registers, {k.shared_bytes} bytes static shared memory, "
            f"{k.spill_store_bytes} bytes spill stores, {k.spill_load_bytes} bytes spill loads, "
            f"{k.stack_frame_bytes} bytes stack frame"
        )
    lines += [f"  ptxas warning: {w}" for w in resources.performance_warnings]
    return (["ptxas resource usage:", *lines]) if lines else []


def _compile_section(compile: CompileResult | None) -> list[str]:
    if compile is None:
        return []
    if compile.status is CompileStatus.REJECTED:
        return [f"Rejected before compiling: {compile.reason}"]
    lines = []
    if compile.status is CompileStatus.COMPILE_ERROR:
        lines += ["Compiler output (trimmed):", trim(compile.log) or compile.reason]
    return lines + resources_lines(compile.resources)


def _target_line(ev: TurnEvaluation, arch: str) -> str:
    families = ""
    if ev.sass is not None and ev.sass.required_families:
        families = f" ({'/'.join(ev.sass.required_families)})"
    text = _TARGET_TEXT[ev.target_instruction]
    if ev.judge is not None and ev.judge.recorded is not None and ev.target_instruction is TargetInstruction.EXECUTED:
        text = f"executed (verified with Nsight Compute on {ev.judge.recorded.label}; recorded)"
    if ev.target_instruction is TargetInstruction.UNKNOWN and ev.sass is not None:
        counted = ", ".join(f"{k}={v}" for k, v in sorted(ev.sass.family_counts.items()) if v)
        static = "present" if ev.sass.target_static is StaticTarget.PRESENT else "absent"
        text = f"not verified at run time; static disassembly: {static}" + (f" ({counted})" if counted else "")
    return f"Target {arch} instructions{families}: {text}"


def recorded_line(rec: RecordedVerdict) -> str:
    """Says that the verdict below was reused from a recorded GPU judgement, and whose."""
    return (f"Recorded verdict: reached earlier on {rec.label} for this exact kernel, problem and workload, and "
            "reused here; no GPU measured anything for this turn.")


def _judge_section(ev: TurnEvaluation) -> list[str]:
    judge = ev.judge
    if judge is None:
        return []
    lines: list[str] = [recorded_line(judge.recorded)] if judge.recorded is not None else []
    if ev.status is EvaluationStatus.NOT_EVALUATED:
        return [f"Not evaluated on a GPU: {judge.reason or 'no GPU judge available'}. "
                "No correctness or timing is known for this kernel."]
    if ev.status is EvaluationStatus.PASSED and judge.performance is not None:
        p = judge.performance
        lines.append(
            f"Correct{RECORDED_MARK if judge.recorded else ''}. Latency {p.latency_ms:.4f} ms; "
            f"baseline {p.reference_latency_ms:.4f} ms; speedup {p.speedup_factor:.3f}x"
        )
    elif judge.correctness is not None and ev.status is not EvaluationStatus.PASSED:
        c = judge.correctness
        lines.append(f"max_abs_error={c.max_absolute_error:.6g}, max_rel_error={c.max_relative_error:.6g}")
    if judge.reason and ev.status is not EvaluationStatus.PASSED:
        lines.append(f"Reason: {trim(judge.reason, 500)}")
    if judge.sanitizer is not None and judge.sanitizer.errors:
        lines += [f"compute-sanitizer: {judge.sanitizer.errors} errors", trim(judge.sanitizer.report)]
    if judge.log and ev.status is not EvaluationStatus.PASSED:
        lines += ["Log (trimmed):", trim(judge.log)]
    return lines


def format_feedback(evaluation: TurnEvaluation, arch: str) -> str:
    """One feedback message for a turn whose kernel was extracted."""
    ev = evaluation
    lines = [f"Status: {ev.status.value}"]
    lines += _judge_section(ev)
    lines += _compile_section(ev.compile)
    if ev.compile is not None and ev.compile.status is CompileStatus.COMPILED:
        lines.append(_target_line(ev, arch))
    return "\n".join(line for line in lines if line)
