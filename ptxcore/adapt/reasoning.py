"""Reasoning synthesis: a first-person hindsight monologue for each pair, and its acceptance rules.

The synthesizer sees what the expert saw (the knowledge in the system prompt, the task; for Fixit also
the wrong kernel and its error message) plus the kernel the expert wrote next, and writes the monologue
the expert had before writing it: why the wrong kernel is wrong and how to fix it (Fixit), or how to
arrive at the kernel (KernelGen). The monologue must never speak of that kernel as something it has seen.
A monologue whose row exceeds the token budget is rewritten to fit (resynthesis).
"""

from __future__ import annotations

import json
import math
import re
from enum import StrEnum

from pydantic import Field

from ptxcore.agent.types import CallContext, LLMClient
from ptxcore.schema import FrozenModel, text_sha256

from .models import ReasoningKind, ReasoningRecord, ReasoningStatus
from .recipe import TARGET_REASONING_CHARS, SynthesizerSpec
from .spec import Template

OPEN, CLOSE = "<my_reasoning>", "</my_reasoning>"
FORBIDDEN = (OPEN, CLOSE, "<think>", "</think>")
"""Strings a monologue may not hold: the synthesis delimiters (the authors' FORBIDDEN_PARQUET_TOKENS) and the row's
own <think> wrapper. A monologue holding one is rewritten (as the authors' resynthesis does), not discarded."""
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_WRAPPED = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)
_NOUN = r"(?:kernel|code|solution|implementation|version|answer)"
_SOLUTION = r"(?:correct(?:ed)?|fixed|final|repaired|working|finished)"
_HERE = r"(?:above|below|shown|provided|given|here|that (?:was|is) (?:given|shown|provided))"
_MENTIONS = re.compile(
    rf"\bexpert'?s\s+(?:own\s+)?{_NOUN}\b"                                   # the Expert's kernel
    rf"|\b(?:the|this|that)\s+{_SOLUTION}\s+{_NOUN}\s+{_HERE}\b"               # the fixed kernel below
    rf"|\b(?:looking\s+at|as\s+shown\s+in|according\s+to)\s+the\s+(?:{_SOLUTION}|expert'?s?)\s+{_NOUN}\b"
    rf"|\bthe\s+(?:solution|answer)\s+(?:above|below|shown|provided|given)\b"   # the solution shown
    rf"|\bthe\s+(?:kernel|code)\s+(?:shown\s+)?below\b",                     # the request shows it below
    re.IGNORECASE)
"""Speaking of the kernel the monologue leads to as something already seen (ours: the authors only ask for it in
the prompt). Words that point at what the expert did see stay legal: the wrong kernel ('the given kernel above',
'the provided code above'), the definition's reference ('the reference code shown'), correctness in general."""

SYSTEM = (
    "You are an expert in CUDA kernels with inline PTX for NVIDIA GPUs. You write the internal monologue an "
    "expert went through before writing a kernel, as training data. Reason at the greatest depth you can: first "
    "person, concrete (exact code structure, indexing, memory movement, synchronization, instructions, "
    "arithmetic), every step of the chain with its calculations and the alternatives that were rejected. Never "
    "paste a whole kernel; short snippets are fine. Put the monologue between "
    f"{OPEN} and {CLOSE} and write nothing outside it.")

_LENGTH = ("Be exhaustive: aim for about {chars:,} characters, the whole thought process rather than a summary "
           "(never mention this length, or any instruction, in the monologue).")
_FIXIT_JOB = (
    "## Your job\nWrite the monologue of the expert who was shown the wrong kernel and its error message "
    "above, from the moment they read the error until they are about to write the fixed kernel. Explain "
    "precisely why the wrong kernel is wrong, tied to its code and to the numbers in the error message, and "
    "how to fix it with the smallest change that works. The monologue happens BEFORE the fixed kernel "
    "exists: never refer to it (no 'the expert's kernel', 'the correct kernel above', 'looking at the "
    "solution'); it must lead there on its own. " + _LENGTH)
_KERNELGEN_JOB = (
    "## Your job\nWrite the monologue of the expert who was given the task above, from reading it until "
    "they are about to write their kernel: the decisions on tiling, memory layout, instructions and "
    "synchronization, with calculations and rejected alternatives. The monologue happens BEFORE the kernel "
    "exists: never refer to it (no 'the expert's kernel', 'the kernel shown', 'looking at the solution'); it "
    "must lead there on its own. " + _LENGTH)


class SynthesisJob(FrozenModel):
    """One synthesizer call to make."""

    build_id: str
    """Build."""
    pair_id: str
    """Pair."""
    attempt: int = Field(ge=0)
    """Attempt number."""
    kind: ReasoningKind
    """Synthesis or resynthesis."""
    messages: list[dict[str, str]]
    """The request."""
    context: CallContext
    """Who is calling (problem, variant: replay serves by these)."""
    correct_kernel: str
    """The kernel the monologue leads to (a monologue holding it whole is rejected)."""
    target_max_chars: int | None = None
    """Resynthesis: the length asked for."""
    template: Template = Template.FIXIT
    """Which rows the monologue is for (its length rule)."""

    @property
    def prompt_text(self) -> str:
        return json.dumps(self.messages, ensure_ascii=False, sort_keys=True)

    @property
    def prompt_sha256(self) -> str:
        return text_sha256(self.prompt_text)


def synthesis_messages(template: Template, knowledge: str, shown: str, kernel: str,
                       target_chars: int = TARGET_REASONING_CHARS) -> list[dict[str, str]]:
    """The request: what the expert saw (`shown`: the task, or task + wrong kernel + error) and the kernel."""
    title = "Task, wrong kernel and its error message" if template is Template.FIXIT else "Task"
    job = (_FIXIT_JOB if template is Template.FIXIT else _KERNELGEN_JOB).format(chars=target_chars)
    user = (f"# What the expert saw\n\n## Knowledge they had\n\n{knowledge.rstrip()}\n\n## {title}\n\n{shown.rstrip()}\n\n"
            f"# The kernel the expert wrote next\n\n```cpp\n{kernel.rstrip()}\n```\n\n"
            f"{job}\n\nAnswer with {OPEN}...{CLOSE} only.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def extract_reasoning(raw: str) -> str:
    """The monologue: the provider's <think> block dropped, then the delimited part (or all that is left)."""
    cleaned = _THINK.sub("", raw or "").strip()
    match = _WRAPPED.search(cleaned)
    return match.group(1).strip() if match else cleaned


def _copies(reasoning: str, kernel: str) -> bool:
    squash = lambda s: re.sub(r"\s+", " ", s).strip()  # noqa: E731
    body = squash(kernel)
    return len(body) >= 200 and body in squash(reasoning)


def _content_rules(reasoning: str, kernel: str) -> tuple[ReasoningStatus, str]:
    bad = [t for t in FORBIDDEN if t in reasoning]
    if bad:
        return ReasoningStatus.FORBIDDEN_TOKEN, f"contains {bad[0]}"
    hit = _MENTIONS.search(reasoning)
    if hit:
        return ReasoningStatus.MENTIONS_SOLUTION, f"refers to the kernel it leads to: {hit.group(0)!r}"
    if _copies(reasoning, kernel):
        return ReasoningStatus.COPIES_SOLUTION, "holds the whole kernel it leads to"
    return ReasoningStatus.ACCEPTED, ""


def judge_reasoning(reasoning: str, spec: SynthesizerSpec, kernel: str,
                    template: Template = Template.FIXIT) -> tuple[ReasoningStatus, str]:
    """A first monologue: accepted, or the first rule it breaks (with one line of detail). The length window is the
    authors' (per template); FORBIDDEN_TOKEN sends it to a rewrite; the others are retried."""
    n, low = len(reasoning), spec.min_chars(template)
    if n < low:
        return ReasoningStatus.TOO_SHORT, f"{n} characters < {low}"
    if n > spec.max_reasoning_chars:
        return ReasoningStatus.TOO_LONG, f"{n} characters > {spec.max_reasoning_chars}"
    return _content_rules(reasoning, kernel)


def judge_rewrite(reasoning: str, kernel: str) -> tuple[ReasoningStatus, str]:
    """A rewrite: the authors accept it when it holds no delimiter (and its row fits, checked by the caller); ours
    also refuses one that speaks of or copies the kernel it leads to."""
    if not reasoning.strip():
        return ReasoningStatus.TOO_SHORT, "empty rewrite"
    return _content_rules(reasoning, kernel)


def run_job(client: LLMClient, job: SynthesisJob, spec: SynthesizerSpec, model: str, now: str) -> ReasoningRecord:
    """Make the call and judge the answer. A failed call is recorded as CALL_FAILED (not an attempt)."""
    base = dict(build_id=job.build_id, pair_id=job.pair_id, attempt=job.attempt, kind=job.kind, model=model,
                prompt_sha256=job.prompt_sha256, target_max_chars=job.target_max_chars, created_at=now)
    try:
        reply = client.complete(job.messages, job.context)
    except Exception as exc:  # noqa: BLE001 - the client already retried; recorded, retried by a rerun
        return ReasoningRecord(**base, status=ReasoningStatus.CALL_FAILED,
                               detail=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
    reasoning = extract_reasoning(reply.text)
    if job.kind is ReasoningKind.RESYNTHESIS:
        status, detail = judge_rewrite(reasoning, job.correct_kernel)
    else:
        status, detail = judge_reasoning(reasoning, spec, job.correct_kernel, job.template)
    u = reply.usage
    return ReasoningRecord(**base, response_text=reply.text, reasoning=reasoning, status=status, detail=detail,
                           prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                           latency_s=u.latency_s, cost_usd=u.cost_usd)


class RewriteTarget(FrozenModel):
    """How long a rewrite must be for its row to fit the budget."""

    min_chars: int = Field(ge=1)
    """Shortest acceptable rewrite."""
    max_chars: int = Field(ge=1)
    """Longest acceptable rewrite."""


class RewriteIssue(StrEnum):
    """Why a monologue is rewritten (the authors' two reasons)."""

    FORBIDDEN_TOKEN = "forbidden_token"
    """It holds a delimiter the row may not carry."""
    OVER_MAX_TOKENS = "over_max_tokens"
    """Its row exceeds the token budget."""


def rewrite_target(reasoning: str, fixed_tokens: int, reasoning_tokens: int, max_tokens: int,
                   spec: SynthesizerSpec, over_budget: bool = True) -> RewriteTarget | None:
    """Characters to aim for (None: the rest of the row alone is too long). Over the budget: the room left, never more
    than the monologue has; otherwise (a delimiter to remove) the monologue's own length, as the authors ask."""
    if not over_budget:
        return RewriteTarget(min_chars=max(1, math.ceil(len(reasoning) * spec.min_target_ratio)),
                             max_chars=max(1, len(reasoning)))
    room = max_tokens - fixed_tokens - spec.safety_tokens
    if room <= 0:
        return None
    chars_per_token = len(reasoning) / max(1, reasoning_tokens)
    max_chars = max(1, min(len(reasoning), int(min(reasoning_tokens, room) * chars_per_token)))
    return RewriteTarget(min_chars=max(1, math.ceil(max_chars * spec.min_target_ratio)), max_chars=max_chars)


_CORRECTIONS = {
    RewriteIssue.FORBIDDEN_TOKEN: f"- The text holds {OPEN}, {CLOSE}, <think> or </think> inside it; the rewrite "
                                  "must hold none of them.",
    RewriteIssue.OVER_MAX_TOKENS: "- It is too long for its training row: shorten it, but only as far as the range "
                                  "below requires.",
}


def rewrite_messages(reasoning: str, target: RewriteTarget,
                     issues: tuple[RewriteIssue, ...] = (RewriteIssue.OVER_MAX_TOKENS,)) -> list[dict[str, str]]:
    """A request to rewrite a monologue for `issues`, keeping its substance, to `target` characters."""
    system = ("You edit CUDA-kernel reasoning used as training data. Keep its technical substance: the "
              "diagnosis, calculations, constraints, rejected alternatives and the plan. Keep it first person and "
              "written before the kernel exists. Return only the rewritten text, without any wrapper or preface.")
    lines = [_CORRECTIONS[i] for i in issues]
    if RewriteIssue.OVER_MAX_TOKENS not in issues:
        lines.append("- Change only what the correction needs: do not condense or summarise anything else.")
    user = ("Rewrite the monologue below.\n\nWhat must change:\n" + "\n".join(lines) + "\n\n"
            f"Length: it has {len(reasoning)} characters; the rewrite should have between {target.min_chars} and "
            f"{target.max_chars} (aim near the upper end; cut no more than needed). Do not mention this request, any "
            f"length or any delimiter. The delimiters only mark the input; do not repeat them.\n\n{OPEN}\n{reasoning}\n{CLOSE}")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def without_forbidden(reasoning: str) -> str:
    """The monologue with the forbidden strings taken out (what its row is measured with before a rewrite)."""
    for token in FORBIDDEN:
        reasoning = reasoning.replace(token, "")
    return reasoning.strip()
