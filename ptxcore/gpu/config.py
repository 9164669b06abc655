"""JudgeConfig: the evaluation protocol's knobs (docs/architecture.md "Evaluation protocol"), all recorded."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from ptxcore.schema import FrozenModel


def default_cache_root() -> Path:
    """$PTXBENCH_CACHE_DIR, else ~/.cache/ptxbench (compile cache lives in <root>/compile)."""
    env = os.environ.get("PTXBENCH_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ptxbench"


class JudgeConfig(FrozenModel):
    """How one candidate is judged. Defaults are the protocol of docs/architecture.md."""

    trials: int = Field(default=3, ge=1)
    """Correctness/timing trials, each with fresh seeded inputs and fresh buffers."""
    warmup: int = Field(default=10, ge=0)
    """Warm-up calls per trial (verified, not timed)."""
    iters: int = Field(default=50, ge=1)
    """Timed calls per trial (each verified); the trial's latency is their median."""
    atol: float | None = None
    """Absolute tolerance; None = the problem's."""
    rtol: float | None = None
    """Relative tolerance; None = the problem's."""
    matched_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    """Fraction of elements that must match; None = the problem's (1.0)."""
    permute_inputs: bool = True
    """Give every warm-up/timed call a fresh batch permutation of the trial's inputs (anti-caching)."""
    sanitizer: bool = True
    """Run the compute-sanitizer memcheck gate."""
    sanitizer_max_runs: int = Field(default=2, ge=1)
    """memcheck runs at most (a second run only when the first was inconclusive)."""
    sanitizer_timeout_s: float = Field(default=600.0, gt=0)
    """Wall-clock limit of one memcheck run, seconds."""
    sanitizer_calls: int = Field(default=1, ge=1)
    """Candidate calls made under memcheck."""
    ncu: bool = True
    """Profile static positives with Nsight Compute to prove the target instructions executed."""
    ncu_timeout_s: float = Field(default=600.0, gt=0)
    """Wall-clock limit of one ncu run, seconds."""
    overlap_tools: bool = True
    """Run the memcheck gate and the Nsight Compute counting run side by side, after correctness and before the
    timed trials (both end before the first timed call; issue 27). False: memcheck before timing, ncu after it."""
    prestart_tools: bool = True
    """Start the next candidate's memcheck and ncu runs ahead (tool, interpreter and imports, then waiting with
    nothing on the GPU) so that only their candidate's part is on the critical path (harness.prestart; issue 27).
    A TVM-FFI candidate's first run of each tool only; every verdict is the fresh run's."""
    prestart_depth: int = Field(default=2, ge=1)
    """Waiting runs kept per tool: 1 serves a candidate that comes seconds after the last; 2 also back-to-back
    prebuilt candidates (each waiting run holds about half a GiB of host memory and nothing on the GPU)."""
    prepare_tools: bool = True
    """With overlap_tools and prestart_tools: a waiting memcheck and ncu run make their CUDA context and inputs
    for a TVM-FFI candidate's problem and workload (no candidate code) while it builds; once built, the runs its
    tool stages will use are kept, the others closed, and every one is used or closed before timing, and before
    any baseline is timed (harness.prestart, `WaitingRun.prepare`; issue 27). Measured on the H200 (2026-12-04,
    fourth session: benchmarks/device/RESULTS.md): memcheck 0.87 -> 0.48 s, ncu 2.0 -> 1.7 s, the hostile suite
    and the golden controls with the same verdicts."""
    defer_session_close: bool = True
    """End a TVM-FFI candidate's session (child exit, meter close, buffers) on a thread after its verdict; the
    judge's next GPU work waits for it first (pipeline.cleanup; issue 27): 0.15-0.18 s off each verdict on the
    H200, the same verdicts (2026-12-04, fourth session)."""
    prestart_child: bool = True
    """Start the next TVM-FFI candidate's session child ahead (its sandbox, interpreter, CUDA context and CUPTI,
    with no candidate in it), the built library handed in before LOAD (harness.waiting; issue 27)."""
    call_timeout_s: float = Field(default=30.0, gt=0)
    """Wall-clock limit of one candidate call (hang -> TIMEOUT), seconds."""
    startup_timeout_s: float = Field(default=120.0, gt=0)
    """Wall-clock limit for the child process to start and load the module, seconds."""
    throttle_retries: int = Field(default=2, ge=0)
    """Times a trial measured under thermal/power throttling is repeated before it is reported flagged."""
    meter: bool = True
    """Audit the timed calls with the judge's own device meter (CUPTI PM sampling in the judge's process): a
    candidate whose claimed latency the meter contradicts is REWARD_HACK, and one that cannot be metered is
    INFRA_ERROR. False: the latency is the candidate process's claim, and the verdict's audit says so."""
    meter_claim_fraction: float = Field(default=0.5, gt=0.0, le=1.0)
    """A trial whose claimed median is below this fraction of the metered busy median (minus the allowance) is
    REWARD_HACK. Set from the honest ratios measured on the H200 (SECURITY.md, "Timing authority")."""
    meter_samples_per_call: int = Field(default=25, ge=4, le=1000)
    """Sampling interval of the meter: about this many samples per call (within 2-500 us and 50,000 samples a
    trial; `choose_interval_ns`). The rule's allowance is two intervals + 20 us, so fewer samples widen it. The
    meter's stop decodes and evaluates every sample: on the H200 (2026-12-02, benchmarks/judge_latency.py, the
    GEMM side by side) it was 2.0 s of the 3.1 s timing stage at 100 samples a call and 0.57 s of 1.47 s at 25.
    25 since 2026-12-03, after the hostile controls (h12's forged spans, h15-h18's tensor time) and the honest
    audits gave the same verdicts at 25 on the H200 (benchmarks/device/RESULTS.md). For the 0.83 ms GEMM the
    allowance is then about 86 us instead of 37 us."""
    meter_allowance_us: float = Field(default=0.0, ge=0.0)
    """Extra allowance per call added to the rule's own (two sampling intervals + 20 us), us."""
    meter_overhead_bound_us: float = Field(default=400.0, ge=0.0)
    """The most GPU-busy time per call the harness itself may cost beyond the kernels' spans, us. A claim is
    forged only below the rule's floor with this much taken off the busy time; between that and the floor after
    the baseline's own measured harness time (`reference_call_overhead_ms`) the meter cannot tell a short
    kernel's claim from the harness's time, so the judgement is inconclusive (INFRA_ERROR), never a pass. On the
    H200 (2026-12-02) every metered call showed 0.16-0.25 ms of busy time beyond its kernels' spans (candidates
    from 0.09 ms decode kernels to 666 ms spinners) and the cuBLAS baseline 0.294 ms; on 2026-12-03 the baselines'
    busy minus covered time was 0.21-0.22 ms (FlashInfer paged), 0.298-0.299 (cuBLAS), 0.307 (FlashInfer ragged)
    and 0.334 (cuDNN attention forward), above the first bound of 300 us: hence 400."""
    build_timeout_s: float = Field(default=300.0, gt=0)
    """nvcc limit on the GPU host, seconds."""
    cache_dir: Path | None = None
    """Cache root (compile, reference latency, ncu evidence); None = $PTXBENCH_CACHE_DIR or ~/.cache."""
    device: int = Field(default=0, ge=0)
    """CUDA device ordinal."""

    def cache_root(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else default_cache_root()
