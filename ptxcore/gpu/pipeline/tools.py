"""The external-tool stages: compute-sanitizer memcheck (the memory-safety gate) and Nsight Compute
(target-instruction execution), each cached by source + cubin hash (+ workload for memcheck)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ptxcore.arch import Architecture
from ptxcore.gpu.config import JudgeConfig
from ptxcore.gpu.errors import InfraError
from ptxcore.gpu.harness.ncu import EvidenceCache, drawn_calls, profile_target
from ptxcore.gpu.harness.prestart import PrestartedTools, WaitingRun
from ptxcore.gpu.harness.sanitizer import MemcheckOutcome, memcheck_command, run_memcheck
from ptxcore.gpu.harness.toolrun import Prestarted
from ptxcore.gpu.pipeline.caches import JsonCache, cache_key
from ptxcore.gpu.pipeline.verdicts import Verdict
from ptxcore.problems import Problem
from ptxcore.sass.credit import with_work
from ptxcore.schema import (
    EvaluationStatus,
    SanitizerSummary,
    StaticTarget,
    TargetInstruction,
    TargetInstructionEvidence,
)

if TYPE_CHECKING:
    from ptxcore.compile import CompiledCandidate
    from ptxcore.gpu.harness.triton import TritonFiles
    from ptxcore.gpu.pipeline.result import ResultBuilder

log = logging.getLogger(__name__)

TOOL_SEED_OFFSET = 1000  # memcheck / ncu draw their own inputs: seed + this (independent of the trials)


class ToolStages:
    def __init__(self, root: Path, config: JudgeConfig) -> None:
        self.config = config
        self.memcheck_cache = JsonCache(root / "memcheck")
        self.evidence_cache = EvidenceCache(root / "ncu")
        self.ncu_logs = root / "ncu-logs"
        self.prestarted = PrestartedTools(enabled=config.prestart_tools, depth=config.prestart_depth)
        self._prepared: dict[str, WaitingRun] = {}
        self._prepared_lock = threading.Lock()

    def prestart(self) -> None:
        """Have the next candidate's memcheck and ncu runs waiting (harness.prestart); the ones this judgement
        does not need stay for the next."""
        c = self.config
        self.prestarted.fill([stage for stage, on in (("memcheck", c.sanitizer), ("ncu", c.ncu)) if on])

    def _prestarted(self, stage: str, candidate: Path | TritonFiles, request: dict) -> Prestarted | None:
        """The stage's run on its waiting process, for a built library (None: a Triton candidate, or none waits):
        the one prepared for this request when there is one."""
        if not isinstance(candidate, Path):
            return None
        with self._prepared_lock:
            run = self._prepared.pop(stage, None)
        if run is not None and run.prepared != request:
            run.close()
            run = None
        if run is None:
            run = self.prestarted.take(stage)
        if run is None:
            return None
        return lambda timeout_s: run.go(candidate, request, timeout_s)

    def prepare_ahead(self, problem: Problem, workload: str) -> list[str]:
        """Before the build: have a waiting run of each enabled tool make its CUDA context and inputs for this
        problem and workload while the candidate builds (nothing of the candidate is needed for that);
        `prepare` then keeps the ones its tool stages will use. The stages prepared."""
        c = self.config
        wanted = [(stage, request) for stage, on, request in (
            ("memcheck", c.sanitizer, self._memcheck_request(problem, workload)),
            ("ncu", c.ncu, self._ncu_request(problem, workload))) if on]
        return self._prepare_runs(wanted)

    def prepare(self, compiled: CompiledCandidate, problem: Problem, workload: str) -> list[str]:
        """Take the waiting memcheck and ncu runs this candidate's tool stage will use and have them make their CUDA
        context and inputs now (WaitingRun.prepare), while its session loads and runs correctness; the stages then
        take these runs. Only runs that will be used: none for a cached verdict, a disabled tool, or no target in
        the SASS (a run prepared ahead for a stage that will not run is closed; one prepared ahead for the same
        request is kept). The stages prepared; every prepared run is used or closed (`release_prepared`) before
        timing."""
        wanted = []
        if self.config.sanitizer and self.memcheck_cache.get(self._memcheck_key(compiled, problem, workload)) is None:
            wanted.append(("memcheck", self._memcheck_request(problem, workload)))
        if self._counts(compiled) and self.evidence_cache.load(compiled.result.source_sha256,
                                                               compiled.result.cubin_sha256) is None:
            wanted.append(("ncu", self._ncu_request(problem, workload)))
        stages = {stage for stage, _ in wanted}
        with self._prepared_lock:
            unused = [self._prepared.pop(stage) for stage in list(self._prepared) if stage not in stages]
            ready = {stage for stage, request in wanted
                     if stage in self._prepared and _same_run(self._prepared[stage].prepared, request)}
        for run in unused:
            run.close()
        return sorted(ready) + self._prepare_runs([(st, rq) for st, rq in wanted if st not in ready])

    def _prepare_runs(self, wanted: list[tuple[str, dict]]) -> list[str]:
        done = []
        for stage, request in wanted:
            run = self.prestarted.take(stage)
            if run is None:
                continue
            try:
                run.prepare(request)
            except OSError as exc:  # the stage then takes another run, or a fresh one
                log.warning("prestarted %s run not prepared: %s", stage, exc)
                run.close()
                continue
            with self._prepared_lock:
                old, self._prepared[stage] = self._prepared.get(stage), run
            if old is not None:
                old.close()
            done.append(stage)
        return done

    def release_prepared(self) -> None:
        """Close every prepared run no stage took (each holds a CUDA context): before timing, and at the end of
        a judgement."""
        with self._prepared_lock:
            runs, self._prepared = list(self._prepared.values()), {}
        for run in runs:
            run.close()

    def _memcheck_key(self, compiled: CompiledCandidate, problem: Problem, workload: str) -> str:
        res = compiled.result
        return cache_key("memcheck-v1", res.source_sha256, res.cubin_sha256, problem.name, workload,
                         str(self.config.sanitizer_calls))

    def _memcheck_request(self, problem: Problem, workload: str) -> dict:
        """The memcheck run's arguments (a prestarted run's request, without its library)."""
        return {"problem": problem.name, "workload": workload, "seed": problem.extension.seed + TOOL_SEED_OFFSET,
                "device": self.config.device, "calls": self.config.sanitizer_calls}

    def _ncu_request(self, problem: Problem, workload: str) -> dict:
        """The counting run's arguments (a prestarted run's request, without its library)."""
        return {"problem": problem.name, "workload": workload, "seed": problem.extension.seed + TOOL_SEED_OFFSET,
                "device": self.config.device, "calls": drawn_calls()}

    def _as_prepared(self, stage: str, request: dict) -> dict:
        """`request` with the call count of the run prepared for `stage` when that run was prepared for the same
        problem, workload, seed and device: the counting run's number of calls is drawn once per candidate
        (ncu.drawn_calls), when its run is prepared."""
        with self._prepared_lock:
            run = self._prepared.get(stage)
        if run is None or not _same_run(run.prepared, request):
            return request
        return {**request, "calls": run.prepared["calls"]}

    def _counts(self, compiled: CompiledCandidate) -> bool:
        """Whether the evidence of this build comes from an ncu run (else from its SASS alone)."""
        return self.config.ncu and compiled.sass is not None and compiled.sass.target_static is not StaticTarget.ABSENT

    def memcheck(self, compiled: CompiledCandidate, problem: Problem, workload: str,
                 result: ResultBuilder) -> Verdict | None:
        """The gate: None when clean; a verdict for errors / a hang; InfraError when inconclusive."""
        return self.memcheck_run(self._memcheck_key(compiled, problem, workload), compiled.artifact, problem, workload,
                                 result)

    def memcheck_run(self, key: str, candidate: Path | TritonFiles, problem: Problem, workload: str,
                     result: ResultBuilder) -> Verdict | None:
        """memcheck of `candidate` (a built library, or a Triton candidate's TritonFiles), cached under `key`."""
        c = self.config
        hit = self.memcheck_cache.get(key)
        if hit is not None:
            result.sanitizer = SanitizerSummary.model_validate(hit["summary"])
            return None if hit["outcome"] == "clean" else Verdict(EvaluationStatus.RUNTIME_ERROR, hit["reason"])
        seed = problem.extension.seed + TOOL_SEED_OFFSET
        request = self._memcheck_request(problem, workload)
        runs = run_memcheck(candidate, lambda inside: memcheck_command(inside, problem.name, workload, seed, c.device,
                                                                      c.sanitizer_calls),
                            c.sanitizer_timeout_s, c.sanitizer_max_runs,
                            prestarted=self._prestarted("memcheck", candidate, request))
        last = runs[-1]
        result.sanitizer = SanitizerSummary(ran=len(runs), errors=last.errors, report=last.report)
        if last.outcome is MemcheckOutcome.TIMEOUT:
            return Verdict(EvaluationStatus.TIMEOUT,
                           f"memcheck run did not finish within {c.sanitizer_timeout_s:.0f} s")
        if last.outcome is MemcheckOutcome.INCONCLUSIVE:
            raise InfraError(f"compute-sanitizer gave no verdict in {len(runs)} run(s) "
                             f"(exit {last.returncode}): {last.report[-400:]}")
        verdict = None
        if last.outcome is MemcheckOutcome.LEFT_RUNNING:
            verdict = Verdict(EvaluationStatus.RUNTIME_ERROR,
                              "memcheck could not conclude: a process the candidate left running kept compute-sanitizer "
                              "from seeing its process end (no memory-safety verdict, so no pass)")
        if last.outcome is MemcheckOutcome.MEMORY_LIMIT:
            verdict = Verdict(EvaluationStatus.RUNTIME_ERROR, f"memcheck run killed: {last.report.splitlines()[0]}")
        if last.outcome is MemcheckOutcome.ERRORS:
            verdict = Verdict(EvaluationStatus.RUNTIME_ERROR,
                              f"compute-sanitizer memcheck found {last.errors} memory error(s)")
        self.memcheck_cache.put(key, {"outcome": last.outcome.value, "reason": verdict.reason if verdict else "",
                                      "summary": result.sanitizer.model_dump(mode="json")})
        return verdict

    def static_only(self, compiled: CompiledCandidate, why: str) -> TargetInstructionEvidence:
        sass = compiled.sass
        static = sass.target_static if sass is not None else None
        if static is StaticTarget.ABSENT:
            return TargetInstructionEvidence(status=TargetInstruction.ABSENT, static=static,
                                             reason="no target-family instruction in the SASS")
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, static=static,
                                         reason=f"not profiled: {why}")

    def evidence(self, compiled: CompiledCandidate, source: str, problem: Problem, workload: str,
                 arch: Architecture) -> TargetInstructionEvidence:
        """The target evidence of a passing build with its work share for this workload (issue 25)."""
        return with_work(self._evidence(compiled, problem, workload, arch), problem, workload, arch)

    def _evidence(self, compiled: CompiledCandidate, problem: Problem, workload: str,
                  arch: Architecture) -> TargetInstructionEvidence:
        res = compiled.result
        if compiled.sass is None or compiled.sass.target_static is StaticTarget.ABSENT:
            return self.static_only(compiled, "")
        if not self.config.ncu:
            return self.static_only(compiled, "ncu disabled in the judge configuration")
        hit = self.evidence_cache.load(res.source_sha256, res.cubin_sha256)
        if hit is not None:
            return hit
        self.ncu_logs.mkdir(parents=True, exist_ok=True)
        seed = problem.extension.seed + TOOL_SEED_OFFSET
        request = self._as_prepared("ncu", self._ncu_request(problem, workload))
        ev = profile_target(compiled.artifact, problem.name, workload, seed, self.config.device, arch,
                            self.config.ncu_timeout_s, self.ncu_logs / f"{res.source_sha256[:16]}.txt",
                            prestarted=self._prestarted("ncu", compiled.artifact, request))
        ev = ev.model_copy(update={"source_sha256": res.source_sha256, "cubin_sha256": res.cubin_sha256})
        self.evidence_cache.store(ev)
        return ev


def _same_run(prepared: dict | None, request: dict) -> bool:
    """Whether a run prepared for `prepared` serves `request`: the same problem, workload, seed and device (the
    counting run's number of calls is the one drawn when it was prepared)."""
    if prepared is None:
        return False
    return {k: v for k, v in prepared.items() if k != "calls"} == {k: v for k, v in request.items() if k != "calls"}
