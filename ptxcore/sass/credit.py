"""Target credit of a piece of evidence for one problem's workload (issue 25): the evidence with its work share.

One function for every holder of evidence and a problem: the live judge (ptxcore.gpu.pipeline: the counting run's
evidence, also on a cache hit) and verdicts reused from a GPU host's records (ptxcore.judge.backends.recorded),
whose evidence may predate work shares and is then credited from its recorded rows (ptxcore.sass.work).
"""

from __future__ import annotations

import logging

from ptxcore.arch import Architecture
from ptxcore.problems import Problem, problem_work
from ptxcore.schema import TargetInstructionEvidence

from .work import carry_threshold, evidence_work

log = logging.getLogger(__name__)


def with_work(ev: TargetInstructionEvidence, problem: Problem, workload_uuid: str | None,
              arch: Architecture) -> TargetInstructionEvidence:
    """The evidence with its work share for this problem's workload (the paper's `status` unchanged)."""
    work = problem_work(problem, workload_uuid)
    threshold = carry_threshold(arch, work.carry_threshold)
    share = evidence_work(ev, work.flops, work.min_bytes, arch, threshold)
    log.info("target work %s: %s", problem.name, share.reason)
    return ev.model_copy(update={"work": share})
