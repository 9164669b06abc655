"""The reason step's bookkeeping: which synthesizer calls are still to make, and how their answers count.

As the authors' pipeline does: a pair needs a synthesis call while it has no usable monologue and fewer rejected
attempts than the recipe allows (Fixit 20, KernelGen 1; a failed call is no attempt, a rerun tries again);
recorded calls are never repeated. A monologue holding a forbidden delimiter is not discarded but rewritten, and
so is one whose row exceeds the token budget: one rewrite each (resynthesis), measured with the delimiters taken
out, accepted only when the rewrite holds none and its row fits.
"""

from __future__ import annotations

from collections import defaultdict

from ptxcore.agent.feedback import clean_log
from ptxcore.agent.types import CallContext
from ptxcore.warehouse import Warehouse

from .budget import RowCounter
from .errors import AdaptError
from .models import PairRecord, ReasoningKind, ReasoningRecord, ReasoningStatus
from .reasoning import (
    RewriteIssue,
    SynthesisJob,
    rewrite_messages,
    rewrite_target,
    synthesis_messages,
    without_forbidden,
)
from .recipe import recipe_sha256
from .repair import checked_source_prompt, repair_user_message
from .rows import RowInputs, message_dicts
from .spec import Template
from .stages import BuildContext, TurnIndex, pair_turns
from .store import AdaptStore

ACCEPTED = ReasoningStatus.ACCEPTED
PLACEHOLDER = "I will repair the kernel."
"""What a monologue that is nothing but delimiters is measured as (the authors' placeholder)."""


def chosen_reasoning(records: list[ReasoningRecord]) -> ReasoningRecord | None:
    """The monologue a row uses: the latest accepted attempt (a fitting rewrite beats its original)."""
    accepted = [r for r in records if r.status is ACCEPTED]
    return max(accepted, key=lambda r: r.attempt) if accepted else None


def rewrite_base(records: list[ReasoningRecord]) -> ReasoningRecord | None:
    """The monologue a rewrite starts from: the chosen one, else the latest synthesis that holds a delimiter."""
    chosen = chosen_reasoning(records)
    if chosen is not None:
        return chosen
    marked = [r for r in records if r.kind is ReasoningKind.SYNTHESIS and r.status is ReasoningStatus.FORBIDDEN_TOKEN]
    return max(marked, key=lambda r: r.attempt) if marked else None


def _rewritten(records: list[ReasoningRecord]) -> bool:
    return any(r.kind is ReasoningKind.RESYNTHESIS and r.status is not ReasoningStatus.CALL_FAILED for r in records)


def _by_pair(store: AdaptStore) -> dict[str, list[ReasoningRecord]]:
    out: dict[str, list[ReasoningRecord]] = defaultdict(list)
    for r in store.reasoning():
        out[r.pair_id].append(r)
    return out


def _request(pair: PairRecord, index: TurnIndex, target_chars: int) -> tuple[list[dict[str, str]], str]:
    source, correct = pair_turns(index, pair)
    prompt = checked_source_prompt(source)
    kernel = correct.kernel_text or ""
    if pair.template is Template.FIXIT:
        shown = repair_user_message(prompt.user, source.kernel_text or "", clean_log(source.feedback))
    else:
        shown = prompt.user
    return synthesis_messages(pair.template, prompt.system, shown, kernel, target_chars), kernel


def _context(pair: PairRecord, attempt: int) -> CallContext:
    """turn = attempt; trajectory_index = the wrong turn's index (Fixit), so a replay library can serve a
    monologue per failing turn."""
    index = pair.source.turn if pair.template is Template.FIXIT else 0
    return CallContext(problem=pair.problem, arch=pair.arch, prompt_variant=pair.prompt_variant,
                       trajectory_index=index, turn=attempt)


def row_inputs(ctx: BuildContext, pair: PairRecord, index: TurnIndex, reasoning: ReasoningRecord) -> RowInputs:
    """What the row of `pair` is built from, with `reasoning` as its monologue."""
    source, correct = pair_turns(index, pair)
    return RowInputs(build_id=ctx.build_id, recipe=ctx.recipe.name, recipe_sha256=recipe_sha256(ctx.recipe_text),
                     source_label=ctx.recipe.source_label, pair=pair, source=source, correct=correct,
                     prompt=checked_source_prompt(source), reasoning=reasoning)


class ReasonBook:
    """The reason step over one build: pending calls, and recording what comes back."""

    def __init__(self, wh: Warehouse, ctx: BuildContext) -> None:
        self.ctx, self.store, self.index = ctx, AdaptStore(wh, ctx.build_id), TurnIndex(wh)
        self.pairs = {p.pair_id: p for p in self.store.pairs(kept_only=True)}
        if not self.pairs:
            raise AdaptError(f"build {ctx.build_id} has no kept pairs: run the pairs step first (or see its summary)")

    def _job(self, pair: PairRecord, attempt: int, kind: ReasoningKind, messages: list[dict[str, str]],
             kernel: str, target: int | None = None) -> SynthesisJob:
        return SynthesisJob(build_id=self.ctx.build_id, pair_id=pair.pair_id, attempt=attempt, kind=kind,
                            messages=messages, context=_context(pair, attempt), correct_kernel=kernel,
                            target_max_chars=target, template=pair.template)

    def synthesis_jobs(self) -> list[SynthesisJob]:
        """Calls still to make for first monologues."""
        done, jobs, spec = _by_pair(self.store), [], self.ctx.recipe.synthesizer
        for pair in self.pairs.values():
            records = done.get(pair.pair_id, [])
            tried = [r for r in records
                     if r.kind is ReasoningKind.SYNTHESIS and r.status is not ReasoningStatus.CALL_FAILED]
            if rewrite_base(records) is not None or len(tried) >= spec.attempts(pair.template):
                continue
            messages, kernel = _request(pair, self.index, spec.target_reasoning_chars)
            jobs.append(self._job(pair, len(records), ReasoningKind.SYNTHESIS, messages, kernel))
        return jobs

    def _tokens(self, pair: PairRecord, reasoning: ReasoningRecord, counter: RowCounter,
                text: str | None = None) -> tuple[int, RowInputs]:
        """Tokens of the pair's row with `reasoning` (or `text` in its place), as the export counts them."""
        inputs = row_inputs(self.ctx, pair, self.index, reasoning)
        return counter.count(message_dicts(inputs, reasoning=text, renderer=counter.renderer)), inputs

    def _rewrite(self, pair: PairRecord, base: ReasoningRecord, attempt: int,
                 counter: RowCounter) -> SynthesisJob | ReasoningRecord | None:
        """The rewrite `base` needs (a job), an OVER_BUDGET record where none can help, or None."""
        spec, budget = self.ctx.recipe.synthesizer, self.ctx.recipe.export.max_tokens
        issues = (RewriteIssue.FORBIDDEN_TOKEN,) if base.status is ReasoningStatus.FORBIDDEN_TOKEN else ()
        measured = without_forbidden(base.reasoning) or PLACEHOLDER
        total, inputs = self._tokens(pair, base, counter, text=measured)
        if total > budget:
            issues += (RewriteIssue.OVER_MAX_TOKENS,)
        if not issues:
            return None
        fixed, _ = self._tokens(pair, base, counter, text="")
        target = rewrite_target(measured, fixed, total - fixed, budget, spec,
                                over_budget=RewriteIssue.OVER_MAX_TOKENS in issues)
        if target is None:
            return ReasoningRecord(
                build_id=self.ctx.build_id, pair_id=pair.pair_id, attempt=attempt, model=spec.model.model,
                kind=ReasoningKind.RESYNTHESIS, prompt_sha256="", status=ReasoningStatus.OVER_BUDGET,
                detail=f"without reasoning the row already takes {fixed} of {budget} tokens")
        return self._job(pair, attempt, ReasoningKind.RESYNTHESIS, rewrite_messages(base.reasoning, target, issues),
                         inputs.correct.kernel_text or "", target.max_chars)

    def resynthesis_jobs(self, counter: RowCounter) -> tuple[list[SynthesisJob], list[ReasoningRecord]]:
        """Rewrites still to make (rows over the budget, monologues holding a delimiter), and OVER_BUDGET records
        where no rewrite can help."""
        if not self.ctx.recipe.synthesizer.resynthesize_over_budget:
            return [], []
        done, jobs, hopeless = _by_pair(self.store), [], []
        for pair in self.pairs.values():
            records = done.get(pair.pair_id, [])
            base = rewrite_base(records)
            if base is None or _rewritten(records):
                continue
            try:
                out = self._rewrite(pair, base, len(records), counter)
            except ValueError:  # the chat template cannot round-trip this row: the export drops it, saying why
                continue
            if isinstance(out, SynthesisJob):
                jobs.append(out)
            elif out is not None:
                hopeless.append(out)
        return jobs, hopeless

    def accepted_pairs(self) -> int:
        """Kept pairs that have an accepted monologue."""
        done = _by_pair(self.store)
        return sum(chosen_reasoning(done.get(pid, [])) is not None for pid in self.pairs)

    def judged(self, record: ReasoningRecord, counter: RowCounter | None = None) -> ReasoningRecord:
        """An accepted rewrite whose row still exceeds the budget becomes OVER_BUDGET."""
        if record.kind is ReasoningKind.RESYNTHESIS and record.status is ACCEPTED and counter is not None:
            budget = self.ctx.recipe.export.max_tokens
            total, _ = self._tokens(self.pairs[record.pair_id], record, counter)
            if total > budget:
                record = record.model_copy(update={"status": ReasoningStatus.OVER_BUDGET,
                                                   "detail": f"rewritten row still {total} > {budget} tokens"})
        return record

    def record(self, job: SynthesisJob | None, record: ReasoningRecord, counter: RowCounter | None = None) -> ReasoningRecord:
        """Store one answer (see `record_many`)."""
        return self.record_many([(job, record)], counter)[0]

    def record_many(self, items: list[tuple[SynthesisJob | None, ReasoningRecord]],
                    counter: RowCounter | None = None) -> list[ReasoningRecord]:
        """Store a batch of answers in two transactions; returns them as stored."""
        final = [(self.judged(r, counter), job.prompt_text if job is not None else "") for job, r in items]
        self.store.add_reasoning_many(final)
        return [r for r, _ in final]
