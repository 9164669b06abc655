"""The reason step's bookkeeping: which synthesizer calls are still to make, and how their answers count.

A pair needs a call while it has no accepted monologue and fewer rejected attempts than the recipe
allows (a failed call is no attempt: a rerun tries again); recorded calls are never repeated. After
synthesis, a pair whose row exceeds the token budget gets one rewrite (resynthesis), accepted only when
the rewritten row fits.
"""

from __future__ import annotations

from collections import defaultdict

from ptxcore.agent.types import CallContext
from ptxcore.prompts import TokenCounter
from ptxcore.warehouse import Warehouse

from .budget import count_messages
from .errors import AdaptError
from .models import PairRecord, ReasoningKind, ReasoningRecord, ReasoningStatus
from .reasoning import SynthesisJob, rewrite_messages, rewrite_target, synthesis_messages
from .recipe import recipe_sha256
from .repair import checked_source_prompt, repair_user_message
from .rows import RowInputs, message_dicts
from .spec import Template
from .stages import BuildContext, TurnIndex, pair_turns
from .store import AdaptStore

ACCEPTED = ReasoningStatus.ACCEPTED


def chosen_reasoning(records: list[ReasoningRecord]) -> ReasoningRecord | None:
    """The monologue a row uses: the latest accepted attempt (a fitting rewrite beats its original)."""
    accepted = [r for r in records if r.status is ACCEPTED]
    return max(accepted, key=lambda r: r.attempt) if accepted else None


def _by_pair(store: AdaptStore) -> dict[str, list[ReasoningRecord]]:
    out: dict[str, list[ReasoningRecord]] = defaultdict(list)
    for r in store.reasoning():
        out[r.pair_id].append(r)
    return out


def _request(pair: PairRecord, index: TurnIndex) -> tuple[list[dict[str, str]], str]:
    source, correct = pair_turns(index, pair)
    prompt = checked_source_prompt(source)
    kernel = correct.kernel_text or ""
    if pair.template is Template.FIXIT:
        shown = repair_user_message(prompt.user, source.kernel_text or "", source.feedback)
    else:
        shown = prompt.user
    return synthesis_messages(pair.template, prompt.system, shown, kernel), kernel


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
                            target_max_chars=target)

    def synthesis_jobs(self) -> list[SynthesisJob]:
        """Calls still to make for first monologues."""
        done, jobs = _by_pair(self.store), []
        for pair in self.pairs.values():
            records = done.get(pair.pair_id, [])
            tried = [r for r in records
                     if r.kind is ReasoningKind.SYNTHESIS and r.status is not ReasoningStatus.CALL_FAILED]
            if chosen_reasoning(records) is not None or len(tried) >= self.ctx.recipe.synthesizer.max_attempts:
                continue
            messages, kernel = _request(pair, self.index)
            jobs.append(self._job(pair, len(records), ReasoningKind.SYNTHESIS, messages, kernel))
        return jobs

    def _tokens(self, pair: PairRecord, reasoning: ReasoningRecord, counter: TokenCounter,
                text: str | None = None) -> tuple[int, RowInputs]:
        inputs = row_inputs(self.ctx, pair, self.index, reasoning)
        return count_messages(counter, message_dicts(inputs, reasoning=text)), inputs

    def resynthesis_jobs(self, counter: TokenCounter) -> tuple[list[SynthesisJob], list[ReasoningRecord]]:
        """Rewrites still to make for rows over the budget, and OVER_BUDGET records where no rewrite can help."""
        spec, budget = self.ctx.recipe.synthesizer, self.ctx.recipe.export.max_tokens
        if not spec.resynthesize_over_budget:
            return [], []
        done, jobs, hopeless = _by_pair(self.store), [], []
        for pair in self.pairs.values():
            records = done.get(pair.pair_id, [])
            chosen = chosen_reasoning(records)
            if chosen is None or any(r.kind is ReasoningKind.RESYNTHESIS and r.status is not ReasoningStatus.CALL_FAILED
                                     for r in records):
                continue
            total, inputs = self._tokens(pair, chosen, counter)
            if total <= budget:
                continue
            fixed, _ = self._tokens(pair, chosen, counter, text="")
            target = rewrite_target(chosen.reasoning, fixed, total - fixed, budget, spec)
            if target is None:
                hopeless.append(ReasoningRecord(
                    build_id=self.ctx.build_id, pair_id=pair.pair_id, attempt=len(records), model=spec.model.model,
                    kind=ReasoningKind.RESYNTHESIS, prompt_sha256="", status=ReasoningStatus.OVER_BUDGET,
                    detail=f"without reasoning the row already takes {fixed} of {budget} tokens"))
                continue
            jobs.append(self._job(pair, len(records), ReasoningKind.RESYNTHESIS, rewrite_messages(chosen.reasoning, target),
                                  inputs.correct.kernel_text or "", target.max_chars))
        return jobs, hopeless

    def accepted_pairs(self) -> int:
        """Kept pairs that have an accepted monologue."""
        done = _by_pair(self.store)
        return sum(chosen_reasoning(done.get(pid, [])) is not None for pid in self.pairs)

    def record(self, job: SynthesisJob | None, record: ReasoningRecord, counter: TokenCounter | None = None) -> ReasoningRecord:
        """Store an answer; an accepted rewrite whose row still exceeds the budget is stored as OVER_BUDGET."""
        if record.kind is ReasoningKind.RESYNTHESIS and record.status is ACCEPTED and counter is not None:
            budget = self.ctx.recipe.export.max_tokens
            total, _ = self._tokens(self.pairs[record.pair_id], record, counter)
            if total > budget:
                record = record.model_copy(update={"status": ReasoningStatus.OVER_BUDGET,
                                                   "detail": f"rewritten row still {total} > {budget} tokens"})
        self.store.add_reasoning(record, job.prompt_text if job is not None else "")
        return record
