"""The tool stages before timing (issue 27): the memcheck gate and the target-instruction counting run side by
side, each in its own sandboxed process, after correctness and before the timed trials.

Neither tool is timed, and both end before the first timed call: the timed trials keep the GPU to themselves
(the judge's device meter counts every process's work, so a tool still running would be charged to the
candidate). A candidate that fails correctness starts neither, as before. The counting run's result waits for
the kernel-set check after timing; a timing verdict other than PASSED leaves it unused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ptxcore.gpu.pipeline.verdicts import Verdict
from ptxcore.schema import TargetInstructionEvidence

if TYPE_CHECKING:
    from ptxcore.gpu.pipeline.result import ResultBuilder
    from ptxcore.gpu.pipeline.session import SessionOutcome

log = logging.getLogger(__name__)


class ToolsBeforeTiming:
    """The session's gate (memcheck, with the counting run beside it when `overlap`) and, afterwards, the target
    evidence: the one counted beside the gate, else counted now (after timing, the sequential order)."""

    def __init__(self, gate: Callable[[SessionOutcome], Verdict | None] | None,
                 evidence: Callable[[SessionOutcome], TargetInstructionEvidence], result: ResultBuilder,
                 *, overlap: bool, after: Callable[[], None] | None = None) -> None:
        self._gate, self._evidence, self._r = gate, evidence, result
        self.overlap = overlap
        self._after = after
        self._target: TargetInstructionEvidence | None = None
        self._error: BaseException | None = None

    @property
    def active(self) -> bool:
        """Whether the session has anything to run between correctness and timing."""
        return self._gate is not None or self.overlap

    def __call__(self, out: SessionOutcome) -> Verdict | None:
        """Between correctness and timing: the gate's verdict (None: clean or no gate); then `after` (the judge
        closes the tool runs prepared for this candidate that neither stage took)."""
        try:
            return self._run(out)
        finally:
            if self._after is not None:
                self._after()

    def _run(self, out: SessionOutcome) -> Verdict | None:
        if not self.overlap:
            return self._gate(out) if self._gate is not None else None
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="judge-tool") as pool:
            counted = pool.submit(self._count, out)
            gated = pool.submit(self._check, out) if self._gate is not None else None
            verdict = gated.result() if gated is not None else None  # an InfraError propagates after both end
            try:
                self._target = counted.result()
            except Exception as exc:  # re-raised where the sequential order raises it
                self._error = exc
        return verdict

    def _check(self, out: SessionOutcome) -> Verdict | None:
        t0 = time.monotonic()
        try:
            return self._gate(out)  # type: ignore[misc]  # only submitted with a gate
        finally:
            self._r.stage("memcheck", time.monotonic() - t0)

    def _count(self, out: SessionOutcome) -> TargetInstructionEvidence:
        t0 = time.monotonic()
        try:
            return self._evidence(out)
        finally:
            self._r.stage("ncu", time.monotonic() - t0)

    def target(self, out: SessionOutcome) -> TargetInstructionEvidence:
        """The evidence of a candidate whose timing passed: the one counted before timing, else counted now."""
        if self._error is not None:
            raise self._error
        if self._target is not None:
            return self._target
        return self._count(out)
