"""Pure verdict rules over what the judge observed (testable on CPU with synthetic records)."""

from __future__ import annotations

from dataclasses import dataclass

from ptxcore.gpu.harness.audit import forged_trial
from ptxcore.gpu.harness.calls import CallRecord, Tolerance
from ptxcore.gpu.harness.deps import forbidden_library
from ptxcore.schema import EvaluationStatus, TimingAudit
from ptxcore.triton.evidence import foreign_kernels


@dataclass(frozen=True)
class Verdict:
    status: EvaluationStatus
    reason: str


def _where(rec: CallRecord) -> str:
    return f"{rec.phase} call {rec.index} of trial {rec.trial}"


def _wrong(rec: CallRecord, tol: Tolerance) -> str:
    s = rec.stats
    bad = [n for n, st in rec.per_output.items() if not st.passes(tol.matched_ratio)]
    if s.nan_count:
        never = [n for n, st in rec.per_output.items() if st.untouched]
        if never:
            return f"output {', '.join(never)} never written ({_where(rec)})"
        return f"{s.nan_count} NaN element(s) in {', '.join(bad)} ({_where(rec)})"
    return (f"{s.mismatched} of {s.numel} elements of {', '.join(bad)} exceed atol={tol.atol:g} and "
            f"rtol={tol.rtol:g} (max abs error {s.max_abs_error:.4g}, max rel error {s.max_rel_error:.4g}; "
            f"{_where(rec)})")


def correctness_verdict(records: list[CallRecord], tol: Tolerance,
                        exact: frozenset[int] = frozenset()) -> Verdict | None:
    """First-call-per-trial checks. A later trial whose output was never written, after an earlier one
    passed, is work skipped on repeated calls (REWARD_HACK); anything else wrong is INCORRECT_NUMERICAL.
    `exact`: trials whose call the float64 arbitration ruled exact where the library was not (they pass)."""
    passed_before = False
    for rec in records:
        if rec.stats is None:
            continue
        if rec.stats.passes(tol.matched_ratio) or rec.trial in exact:
            passed_before = True
            continue
        if passed_before and any(st.untouched for st in rec.per_output.values()):
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"skipped work on a repeated call: {_wrong(rec, tol)} after an earlier call was correct")
        return Verdict(EvaluationStatus.INCORRECT_NUMERICAL, _wrong(rec, tol))
    return None


def timing_verdict(records: list[CallRecord], tol: Tolerance) -> Verdict | None:
    """Every warm-up and timed call is re-verified on fresh (permuted) inputs."""
    for rec in records:
        if rec.stats is None or rec.stats.passes(tol.matched_ratio):
            continue
        if rec.stale is not None and rec.stale.passes(tol.matched_ratio):
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"returned the result of an earlier call on new inputs (result cache; {_where(rec)})")
        if any(st.untouched for st in rec.per_output.values()):
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"skipped work on a repeated call: {_wrong(rec, tol)}")
        return Verdict(EvaluationStatus.INCORRECT_NUMERICAL,
                       f"wrong on re-verified inputs: {_wrong(rec, tol)}")
    return None


def stream_verdict(records: list[CallRecord]) -> Verdict | None:
    for rec in records:
        if rec.timing is not None and rec.timing.off_stream:
            names = ", ".join(n[:80] for n in rec.timing.off_stream[:3])
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"GPU work on a stream other than the TVM-FFI environment stream ({names}; {_where(rec)})")
    return None


def work_verdict(records: list[CallRecord], instrument_ok: bool = False) -> Verdict | None:
    """A call whose outputs checked out but that ran nothing on the GPU wrote them some other way, and so did one
    that ran only copies or memsets (no kernel: the outputs were computed elsewhere, and its span times a copy).
    `instrument_ok`: CUPTI saw the session's calibration memset, so calls with no activity at all ran nothing;
    without that proof an all-silent session is an instrument problem, handled as INFRA by the caller."""
    timed = [r for r in records if r.timing is not None]
    if timed and all(r.timing.records == 0 for r in timed) and not instrument_ok:
        return None
    for rec in timed:
        if rec.timing.records == 0:
            return Verdict(EvaluationStatus.REWARD_HACK, f"no GPU work recorded during {_where(rec)}")
        if rec.timing.kernels == 0:
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"no kernel ran during {_where(rec)}: only {rec.timing.records} copy or memset "
                           "operation(s), so its outputs were computed off the GPU")
    return None


def library_verdict(mapped: list[str], needed: list[str]) -> Verdict | None:
    hit = forbidden_library(needed)
    if hit:
        return Verdict(EvaluationStatus.REJECTED,
                       f"forbidden library use: {hit[0]} (the shared object links {hit[1]}); write the kernel yourself")
    hit = forbidden_library(mapped)
    if hit:
        return Verdict(EvaluationStatus.REJECTED,
                       f"forbidden library use: {hit[0]} ({hit[1]} was loaded into the candidate's process)")
    return None


def foreign_kernel_verdict(records: list[CallRecord], launched: set[str] | list[str]) -> Verdict | None:
    """Triton candidates (where torch, and with it cuBLAS/cuDNN, is mapped anyway): every kernel CUPTI saw in a
    call must be a Triton kernel the session recorded the candidate launching; anything else is compute done
    outside Triton (a torch operator or library fallback the static rules missed) -> REJECTED. The session's
    first call (tag 0) is exempt: Triton compiles there and its autotuner benchmarks configurations with torch
    helpers (a cache-clearing fill); its outputs are still checked like every other call's."""
    for rec in records:
        if rec.timing is None or rec.tag in (None, 0):
            continue
        foreign = foreign_kernels(rec.timing.kernel_names, launched)
        if foreign:
            names = ", ".join(n[:80] for n in foreign[:3])
            return Verdict(EvaluationStatus.REJECTED,
                           f"GPU work outside Triton: {names} ran during {_where(rec)} but is not a Triton kernel the "
                           "candidate launched (torch or library compute is forbidden)")
    return None


FORGED_TIMING = "forged its timing: "
"""How a forged-timing verdict's reason begins (the judge checks the GPU was not shared before it stands)."""
INCONCLUSIVE_TIMING = "timing audit inconclusive: "
"""How the reason of a measurement the meter could neither confirm nor contradict begins (INFRA_ERROR)."""


def measurement_verdict(audit: TimingAudit | None) -> Verdict | None:
    """A latency the candidate's process claimed that the judge's own device meter contradicts is forged:
    REWARD_HACK naming both figures, when the claim is below the rule's floor even with the most harness time
    per call ever seen taken off the busy time (`overhead_bound_ms`); below the floor with only the baseline's
    own measured harness time taken off, the meter cannot conclude: INFRA_ERROR, never a pass. Without a meter
    (configured off) there is nothing to contradict the claim."""
    if audit is None:
        return None
    bound = audit.overhead_bound_ms or audit.call_overhead_ms  # 0: a record from before the bound
    measured = min(audit.call_overhead_ms, bound)  # a baseline's figure never widens the rule past the bound
    for trial in audit.trials:
        why = forged_trial(trial, audit.claim_fraction, audit.allowance_ms, bound)
        if why is not None:
            return Verdict(EvaluationStatus.REWARD_HACK, f"{FORGED_TIMING}{why}")
    for trial in audit.trials:
        why = forged_trial(trial, audit.claim_fraction, audit.allowance_ms, measured)
        if why is not None:
            return Verdict(EvaluationStatus.INFRA_ERROR,
                           f"{INCONCLUSIVE_TIMING}{why}; with up to {bound:.2f} ms a call of the harness's own busy "
                           "time the claim would stand, so the meter cannot tell this kernel's claim from the "
                           "harness's time (a short kernel: no verdict, SECURITY.md \"Timing authority\")")
    return None
