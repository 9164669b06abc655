"""Target credit tied to the work (issue 25), in the judge process: the work share attached to the evidence, and
the two checks that the counted call is the timed call.

- the work share (`with_work`, ptxcore.sass.credit): the share of the problem's useful work the profiled call's
  target instructions performed, and the carries verdict (ptxcore.sass.work), attached to the evidence. Computed
  on every judgement, also on a cache hit: the cache is keyed by source and build, the share by the workload.
- `kernel_set_verdict`: the kernels ncu profiled (names, launches per call) against those CUPTI recorded in every
  timed call; a difference is REWARD_HACK (ncu ran in another process on other inputs: a candidate that behaves
  differently there is caught by what it launches). Grids are compared where both sides give them. A counting run
  that profiled nothing while the timed calls ran kernels is such a difference too (it fails closed).
- `tensor_time_verdict`: the timed calls' metered tensor-pipe time against the least time the profiled call's
  tensor FLOPs need at the GPU's peak rate; far less is REWARD_HACK (the same kernels, but the tensor work only
  under the profiler). Needs the device meter's tensor counters; the slack is calibrated below.
- `unmetered_carry`: when the rule cannot run (the meter ran without its tensor counters, no meter, no peak rate
  for the architecture), nothing ties the counted work to the timed calls, so the carries verdict becomes
  `unknown`: the gate cannot conclude, so it gives no credit (the verdict and the paper's `executed` stay).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from ptxcore.arch import Architecture
from ptxcore.gpu.child.cupti import CallTiming
from ptxcore.gpu.pipeline.verdicts import Verdict
from ptxcore.schema import (
    EvaluationStatus,
    ProfileOutcome,
    TargetInstruction,
    TargetInstructionEvidence,
    TargetWork,
    TimingAudit,
)

log = logging.getLogger(__name__)

PEAK_TENSOR_FLOPS_PER_S: dict[str, float] = {"hopper": 1978.9e12}
"""The fastest dense tensor rate of the architecture (H100/H200 SXM: FP8/INT8 1978.9 TFLOPS; BF16/FP16 989.4): the
least tensor-pipe time for N FLOPs is N / this, whatever the data type."""
TENSOR_TIME_SLACK = 0.25
"""The timed calls must show at least this fraction of that least time. Calibrated on the H200 (2026-12-02, fifth
session; `benchmarks/tensor_time_margin.py` over the envelopes): in 27 judgements of 17 TMA + wgmma kernels
that carry the target (the library's 14 and three GEMM variants, 3 trials each), every trial's metered tensor-pipe
time was 2.48-7.55 times the least time (the lowest: the persistent GEMM, which runs closest to peak), so the
rule's line sits a factor of 10 below the lowest honest trial. An honest bf16 kernel cannot go below 2: its tensor
instructions run at most at the bf16 rate, half the peak used here. The counter counts every tensor-pipe
instruction (HGMMA and HMMA alike): a kernel that takes the wgmma path under the profiler and an `mma.sync` path
when timed keeps its tensor pipe busy and is not caught by this rule (SECURITY.md, "What it does not claim")."""


@dataclass(frozen=True)
class KernelSet:
    """What one side ran in one call: launches per kernel name (and grids where known)."""

    launches: dict[str, int]
    grids: dict[str, tuple[int, int, int]] | None = None


def _name(n: str) -> str:
    return "".join(n.split())  # a wrapped ncu name may have lost or gained a space at the wrap


def profiled_set(ev: TargetInstructionEvidence) -> KernelSet:
    grids = {_name(k.name): k.grid for k in ev.profiled_kernels if k.grid is not None}
    return KernelSet({_name(k.name): k.launches for k in ev.profiled_kernels},
                     grids if len(grids) == len(ev.profiled_kernels) else None)


def _describe(ks: KernelSet) -> str:
    return ", ".join(f"{n[:60]} x{c}" for n, c in sorted(ks.launches.items())[:4]) or "no kernel"


def _overflow(call: CallTiming) -> int | None:
    """Distinct kernels the call ran beyond the names CUPTI's record lists (None: all are listed)."""
    last = call.kernel_names[-1] if call.kernel_names else ""
    if last.startswith("... ") and last.endswith(" more kernels"):
        return int(last.split()[1])
    return None


def _call_differs(profiled: KernelSet, call: CallTiming, only: set[str] | None) -> str | None:
    more = _overflow(call)
    listed = call.kernel_names[:-1] if more is not None else call.kernel_names
    names = {_name(n) for n in listed}
    if only is not None:
        names &= only
    expected = set(profiled.launches)
    if more is not None:  # CUPTI lists the first names in sorted order, then how many more there were
        expected = set(sorted(expected)[: len(listed)]) if len(profiled.launches) == len(listed) + more else None
    if names != expected:
        want = set(profiled.launches)
        extra, missing = sorted(names - want), sorted(want - names)
        return (f"timed-only kernels {[n[:60] for n in extra[:3]]}, profiled-only kernels "
                f"{[n[:60] for n in missing[:3]]}" if expected is not None else
                f"{len(listed) + (more or 0)} distinct kernels in the timed call, {len(want)} profiled")
    if only is None and call.kernels != sum(profiled.launches.values()):
        return f"{call.kernels} kernel launches in the timed call, {sum(profiled.launches.values())} profiled"
    return None


def kernel_set_verdict(ev: TargetInstructionEvidence, timed: Sequence[CallTiming],
                       only: Sequence[str] | None = None, timed_grids: Sequence[dict] | None = None) -> Verdict | None:
    """REWARD_HACK when the kernels ncu profiled differ from those of any timed call (names, and launches per call
    when every kernel of the call is profiled); None when they agree or nothing was profiled. `only`: ncu profiled
    only these kernels (a Triton candidate's), so only they are compared. `timed_grids`: per timed call, name ->
    grid from CUPTI, when the child records them (not yet: CallTiming has no grid)."""
    if ev.profile is ProfileOutcome.NOTHING_PROFILED:
        return _nothing_profiled(timed, {_name(n) for n in only} if only is not None else None)
    if ev.status is not TargetInstruction.EXECUTED and ev.status is not TargetInstruction.NOT_EXECUTED:
        return None  # nothing was profiled (absent, unknown): there is no counted call to compare
    if not ev.profiled_kernels:
        return Verdict(EvaluationStatus.INFRA_ERROR, "the target evidence names no profiled kernel to compare with "
                       "the timed calls (evidence from before the kernel-set check)")
    profiled = profiled_set(ev)
    keep = {_name(n) for n in only} if only is not None else None
    for i, call in enumerate(timed):
        why = _call_differs(profiled, call, keep)
        if why is None and timed_grids is not None and profiled.grids is not None:
            why = _grid_differs(profiled.grids, timed_grids[i])
        if why is not None:
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"the profiled call is not the timed call: {why} (timed call {call.tag}; profiled: "
                           f"{_describe(profiled)})")
    return None


def _nothing_profiled(timed: Sequence[CallTiming], only: set[str] | None) -> Verdict | None:
    """ncu ran to its end and counted no kernel in the counted call: REWARD_HACK when the timed calls ran kernels
    (those ncu was to count, with `only`); None when they ran none either (the kernel-less call is judged by the
    work rule)."""
    for call in timed:
        names = {_name(n) for n in call.kernel_names if not n.startswith("... ")}
        ran = bool(names & only) if only is not None else call.kernels > 0
        if ran:
            return Verdict(EvaluationStatus.REWARD_HACK,
                           f"the profiled call is not the timed call: Nsight Compute profiled no kernel in the counted "
                           f"call, timed call {call.tag} ran {call.kernels} kernel launch(es) "
                           f"({', '.join(n[:60] for n in sorted(names)[:3])})")
    return None


def _grid_differs(profiled: dict[str, tuple[int, int, int]], timed: dict) -> str | None:
    for name, grid in profiled.items():
        got = timed.get(name)
        if got is not None and tuple(got) != grid:
            return f"{name[:60]} launched with grid {tuple(got)} when timed, {grid} when profiled"
    return None


def tensor_time_ratios(ev: TargetInstructionEvidence, audit: TimingAudit | None,
                       arch: Architecture) -> list[float] | None:
    """Each timed trial's metered tensor-pipe time per call over the least time the profiled call's target FLOPs
    need at the architecture's peak; None where there is nothing to compare (the target does not carry the work,
    no FLOP count, no peak for the architecture, no meter or no tensor counter)."""
    work, peak = ev.work, PEAK_TENSOR_FLOPS_PER_S.get(arch.key)
    if work is None or work.carries is not TargetWork.CARRIES or not work.target_flops or peak is None or audit is None:
        return None
    trials = [t for t in audit.trials if t.tensor_active_share is not None and t.busy_median_ms is not None]
    if not trials:
        return None
    least_ms = work.target_flops / peak * 1e3
    return [t.tensor_active_share * t.busy_median_ms / least_ms for t in trials]


def unmetered_carry(ev: TargetInstructionEvidence, audit: TimingAudit | None,
                    arch: Architecture) -> TargetInstructionEvidence:
    """The evidence, its work share's `carries` turned to UNKNOWN when the target carried the work in the profiled
    call but the tensor-time rule has nothing to compare it with (`tensor_time_ratios` is None); unchanged
    otherwise. A target that carries no FLOPs never reaches CARRIES (TMA bytes alone give at most UNKNOWN)."""
    work = ev.work
    if work is None or work.carries is not TargetWork.CARRIES or tensor_time_ratios(ev, audit, arch) is not None:
        return ev
    if PEAK_TENSOR_FLOPS_PER_S.get(arch.key) is None:
        why = f"no peak tensor rate is known for {arch.key}"
    elif audit is None or not audit.trials:
        why = "the timed calls were not metered"
    else:
        why = "the device meter ran without its tensor counters"
    reason = (f"{work.reason}; unverified: {why}, so nothing ties these FLOPs to the timed calls "
              "(the tensor-time rule, issue 25)")[:300]
    log.warning("target work not credited: %s", why)
    return ev.model_copy(update={"work": work.model_copy(update={"carries": TargetWork.UNKNOWN, "reason": reason})})


def tensor_time_verdict(ev: TargetInstructionEvidence, audit: TimingAudit | None, arch: Architecture,
                        slack: float = TENSOR_TIME_SLACK) -> Verdict | None:
    """REWARD_HACK when the target carried the work in the profiled call but every timed trial's metered tensor-pipe
    time is below `slack` x the least time those FLOPs need at the architecture's peak; None otherwise (also when
    there is nothing to compare: `tensor_time_ratios`)."""
    ratios = tensor_time_ratios(ev, audit, arch)
    if ratios is None or max(ratios) >= slack:
        return None
    work = ev.work
    least_ms = work.target_flops / PEAK_TENSOR_FLOPS_PER_S[arch.key] * 1e3
    return Verdict(EvaluationStatus.REWARD_HACK,
                   f"the profiled call ran {work.target_flops:,} tensor FLOPs (at least {least_ms:.3g} ms of tensor "
                   f"pipe at peak), the timed calls' tensor pipe was active at most {max(ratios) * least_ms:.3g} ms "
                   "per call")
