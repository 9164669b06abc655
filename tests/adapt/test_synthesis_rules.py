"""The reason step's retries and rewrites, as the authors' pipeline does them: a rejected Fixit monologue is asked
for again (up to the attempts), one holding a delimiter is rewritten (not dropped), a rewrite is accepted only when it
holds none and its row fits. The synthesizer is a scripted fake (tests only)."""

from __future__ import annotations

from ptxcore.adapt import ReasonBook, parse_recipe, resolve_counter, run_job
from ptxcore.adapt.models import ReasoningKind, ReasoningStatus
from ptxcore.agent.types import LLMReply

from .test_stages import built_pairs, ctx_for

GOOD = "I read the error: the LSE store indexes rows by q * D, but LSE is [B, H, S]. " * 30  # ~2,300 characters


class Scripted:
    """Answers from a list, in call order."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.calls = list(answers), []

    def complete(self, messages, context):
        self.calls.append(messages)
        return LLMReply(text=self.answers.pop(0))


def _book(wh, extra: str = ""):
    ctx = ctx_for(wh)
    text = ctx.recipe_text.replace("  min_reasoning_chars: 200  # the scripted demo monologues are about 1,000 "
                                   "characters (the demo recipe says so too)\n", extra)
    ctx = built_pairs(wh, ctx.model_copy(update={"recipe": parse_recipe(text), "recipe_text": text}))
    return ctx, ReasonBook(wh, ctx)


def _round(book, ctx, client, counter, jobs):
    return [book.record(j, run_job(client, j, ctx.recipe.synthesizer, "fake", "now"), counter) for j in jobs]


def test_a_rejected_monologue_is_asked_for_again_and_a_delimiter_is_rewritten(wh):
    ctx, book = _book(wh)
    counter, _ = resolve_counter("tiktoken:o200k_base")
    pair = sorted(book.pairs)[0]
    book.pairs = {pair: book.pairs[pair]}  # one pair keeps the script readable
    client = Scripted([
        "<my_reasoning>too short</my_reasoning>",                                  # 1: TOO_SHORT (< 2,000): retried
        f"<my_reasoning>{GOOD} As the expert's kernel shows, it works.</my_reasoning>",  # 2: MENTIONS: retried
        f"<my_reasoning>{GOOD} <think> stray</my_reasoning>",                      # 3: FORBIDDEN_TOKEN: to rewrite
        GOOD,                                                                       # the rewrite: accepted
    ])
    statuses = []
    for _ in range(4):
        jobs = book.synthesis_jobs()
        if not jobs:
            break
        statuses += [r.status for r in _round(book, ctx, client, counter, jobs)]
    assert statuses == [ReasoningStatus.TOO_SHORT, ReasoningStatus.MENTIONS_SOLUTION, ReasoningStatus.FORBIDDEN_TOKEN]
    jobs, hopeless = book.resynthesis_jobs(counter)
    assert hopeless == [] and [j.kind for j in jobs] == [ReasoningKind.RESYNTHESIS]
    assert "must hold none of them" in jobs[0].messages[1]["content"]  # the authors' forbidden-token correction
    assert "do not condense" in jobs[0].messages[1]["content"]          # and no shortening: the row fits
    (rewrite,) = _round(book, ctx, client, counter, jobs)
    assert rewrite.status is ReasoningStatus.ACCEPTED and book.accepted_pairs() == 1
    assert book.resynthesis_jobs(counter) == ([], []) and book.synthesis_jobs() == []  # one rewrite, never again


def test_attempts_stop_at_the_recipes_limit(wh):
    ctx, book = _book(wh, "  max_attempts: 2\n")
    counter, _ = resolve_counter("tiktoken:o200k_base")
    client = Scripted(["<my_reasoning>short</my_reasoning>"] * 4)
    for _ in range(3):
        _round(book, ctx, client, counter, book.synthesis_jobs())
    assert len(client.calls) == 4 and book.synthesis_jobs() == [] and book.accepted_pairs() == 0  # 2 pairs x 2


def test_a_rewrite_that_still_holds_a_delimiter_is_refused(wh):
    ctx, book = _book(wh)
    counter, _ = resolve_counter("tiktoken:o200k_base")
    client = Scripted([f"<my_reasoning>{GOOD} <my_reasoning> again</my_reasoning>"] * 2)
    _round(book, ctx, client, counter, book.synthesis_jobs())
    assert {r.status for r in book.store.reasoning()} == {ReasoningStatus.FORBIDDEN_TOKEN}
    assert book.synthesis_jobs() == []  # a delimiter is no reason to synthesize again: it is rewritten
    jobs, _ = book.resynthesis_jobs(counter)
    client.answers = [f"{GOOD} <my_reasoning>"] * len(jobs)
    assert {r.status for r in _round(book, ctx, client, counter, jobs)} == {ReasoningStatus.FORBIDDEN_TOKEN}
    assert book.accepted_pairs() == 0 and book.resynthesis_jobs(counter) == ([], [])
