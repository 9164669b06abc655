"""The repair-retrieval `FeedbackAugmenter`: on a failing turn, the current kernel is the BM25 query.

A turn is *failing* when its kernel was extracted and its verdict counts against the model but is not
PASSED (compile / runtime / numerical errors, timeouts, rejected, reward hack). Passed turns and turns
without a verdict (NOT_EVALUATED, INFRA_ERROR) retrieve nothing, and neither do extraction errors (there
is no kernel to query with). Every turn still gets a record naming the condition, so the warehouse says
under which condition each turn was played.
"""

from __future__ import annotations

from ptxcore.agent.retrieval_spec import RepairRetrievalSpec
from ptxcore.agent.types import AugmentedFeedback, CallContext, TurnEvaluation
from ptxcore.schema import AugmentationStatus, EvaluationStatus, FeedbackAugmentation, RetrievalCondition

from .index import RepairNotesIndex
from .render import render_fixed, render_notes


def is_failing(evaluation: TurnEvaluation) -> bool:
    """A verdict against the model that is not PASSED."""
    status = evaluation.status
    return status.counts_against_model and status not in (EvaluationStatus.PASSED, EvaluationStatus.EXTRACTION_ERROR)


class RepairRetrievalAugmenter:
    """Appends retrieved repair notes (and, in the ORACLE condition, verified fixes) to failing turns."""

    def __init__(self, spec: RepairRetrievalSpec, index: RepairNotesIndex | None, source: str = "") -> None:
        if spec.mode is not RetrievalCondition.NONE and index is None:
            raise ValueError(f"repair_retrieval mode {spec.mode.value} needs a notes index")
        self.spec, self.index, self.source = spec, index, source
        self.source_sha256 = index.corpus_sha256 if index is not None else ""

    def _record(self, status: AugmentationStatus, **fields: object) -> FeedbackAugmentation:
        return FeedbackAugmentation(condition=self.spec.mode, status=status, source=self.source,
                                    source_sha256=self.source_sha256, **fields)

    def augment(self, kernel: str | None, evaluation: TurnEvaluation, context: CallContext) -> AugmentedFeedback:
        if self.spec.mode is RetrievalCondition.NONE or self.index is None:
            return AugmentedFeedback(record=self._record(AugmentationStatus.DISABLED))
        if kernel is None:
            return AugmentedFeedback(record=self._record(AugmentationStatus.NO_KERNEL))
        if not is_failing(evaluation):
            return AugmentedFeedback(record=self._record(AugmentationStatus.NOT_FAILING))
        hits = self.index.search(kernel, context.problem, self.spec.top_k_groups, self.spec.min_score)
        render = render_fixed if self.spec.mode is RetrievalCondition.NOTES_FIXED else render_notes
        text, items = render(hits, self.spec.max_notes)
        if not text:
            return AugmentedFeedback(record=self._record(AugmentationStatus.NO_MATCH))
        record = self._record(AugmentationStatus.APPENDED, items=items, appended_chars=len(text) + 1)
        return AugmentedFeedback(text=text, record=record)
