"""The environment's evaluator: the CPU stage, then the judge seam, folded into one verdict.

The same stages, in the same order, as a campaign's `compile` and `judge` tasks (flows/trajectory.py
TaskEvaluator), run in this process: `build_candidate` (sandboxed nvcc, ptxas report, static SASS), then
`JudgeBackend.judge` with the CPU build, then `fold_evaluation`. A bad kernel is a verdict; INFRA_ERROR raises
InfraFailure, so that a step the judge could not judge is never charged to the policy.
"""

from __future__ import annotations

import logging
import threading
from contextlib import nullcontext

from ptxcore.agent.evaluation import compile_verdict, fold_evaluation, language_verdict
from ptxcore.agent.types import CallContext, TurnEvaluation
from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, build_candidate
from ptxcore.judge import InfraFailure, JudgeBackend
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus, Language

log = logging.getLogger(__name__)


class JudgeEvaluator:
    """Compiles and judges one kernel through `backend` (any route: local GPU, service, recorded, none, plugin)."""

    def __init__(self, backend: JudgeBackend, language: Language = Language.CUDA,
                 gate: threading.BoundedSemaphore | None = None) -> None:
        self.backend = backend
        self.language = Language(language)
        self.gate = gate

    @property
    def name(self) -> str:
        return self.backend.name

    def evaluate(self, source: str, context: CallContext) -> TurnEvaluation:
        unjudged = language_verdict(self.language)
        if unjudged is not None:
            return unjudged
        arch = get_architecture(context.arch)
        compiled = build_candidate(source, BuildOptions(arch=arch), language=self.language)
        early = compile_verdict(compiled.result, compiled.sass)
        if early is not None:
            return early
        with self.gate if self.gate is not None else nullcontext():  # the GPU-tagged bound (gpu_slots)
            result = self.backend.judge(source, get_problem(context.problem), arch, compiled=compiled,
                                        language=self.language)
        if result.status is EvaluationStatus.INFRA_ERROR:
            log.warning("%s turn %d: INFRA_ERROR (%s)", context.problem, context.turn, result.reason)
            raise InfraFailure(result)
        return fold_evaluation(compiled.result, compiled.sass, result)


class SlotGate:
    """Judgements in flight per architecture (a campaign's gpu_slots), shared by the evaluators of one run."""

    def __init__(self, slots: dict[str, int] | None = None) -> None:
        if any(n < 1 for n in (slots or {}).values()):
            raise ValueError("gpu_slots: every architecture needs at least one slot")
        self._gates = {arch: threading.BoundedSemaphore(n) for arch, n in (slots or {}).items()}

    def gate(self, arch: str) -> threading.BoundedSemaphore | None:
        """The architecture's semaphore (None: unbounded)."""
        return self._gates.get(arch)
