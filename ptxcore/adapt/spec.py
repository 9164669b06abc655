"""What a build selects: the frozen, recorded `SelectionSpec`, and the named problem scopes.

Failure mining (paper Sec. 3): failed turns of the model to adapt whose status is a compile, runtime,
timeout or numerical error, whose answer ends with a closed code fence, from a window of source turns
(0-4), under pattern-hinted prompt variants, capped per problem (33) by a deterministic largest-remainder
allocation over (error type, turn) strata. KernelGen selects correct, target-executing turns instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ptxcore.schema import EvaluationStatus, FrozenModel, TargetInstruction, TargetWork, TurnRecord

FOUR_OPS = ("mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal")
"""The paper's 4ops scope: the four d128 attention problems (forward with LSE and backward, causal or not)."""
EIGHT_OPS = FOUR_OPS + ("mha_with_lse_d64", "mha_with_lse_d64_causal", "mha_bwd_d64", "mha_bwd_d64_causal")
"""The paper's 8ops scope: 4ops plus the d64 twins."""
SCOPES: dict[str, tuple[str, ...]] = {"4ops": FOUR_OPS, "8ops": EIGHT_OPS}

DEFAULT_FAILURES = (EvaluationStatus.COMPILE_ERROR, EvaluationStatus.RUNTIME_ERROR, EvaluationStatus.TIMEOUT,
                    EvaluationStatus.INCORRECT_NUMERICAL)
"""Compile, runtime, timeout and numerical errors: the reference's four failure labels."""
NOT_FAILURES = (EvaluationStatus.PASSED, EvaluationStatus.EXTRACTION_ERROR, EvaluationStatus.INFRA_ERROR,
                EvaluationStatus.NOT_EVALUATED)
"""Never failure labels: a pass, a turn without a kernel to fix, our own fault, no verdict."""
PATTERN_HINTED = "pattern-hinted"
"""Keyword for `prompt_variants`: every variant whose knowledge-pack level includes a pattern."""
PAPER_HINTED = "paper-hinted"
"""Keyword for `prompt_variants`: the authors' per-direction hinted variants, in our names (PAPER_VARIANTS)."""
Stratum = Literal["error_type", "turn", "prompt_variant"]
Direction = Literal["forward", "backward"]


def direction(problem: str) -> Direction:
    """The authors' rule (filter_fixit_error_kernels_by_prompt_tag.py, allowed_prompt_tags): a definition whose
    name starts with mha_bwd is a backward problem, every other one forward."""
    return "backward" if problem.startswith("mha_bwd") else "forward"


def _known_variants(v: list[str]) -> list[str]:
    from ptxcore.prompts import UnknownVariantError, load_variant

    for name in v:
        try:
            load_variant(name)
        except UnknownVariantError as exc:
            raise ValueError(str(exc).strip("'")) from None
    return v


class DirectionVariants(FrozenModel):
    """Prompt variants admitted per problem direction (forward and backward problems mine different variants)."""

    forward: list[str] = Field(min_length=1)
    """Variants whose failures are mined on forward problems."""
    backward: list[str] = Field(min_length=1)
    """Variants whose failures are mined on backward problems (names starting with mha_bwd)."""

    @field_validator("forward", "backward")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        return _known_variants(v)

    def admitted(self, problem: str) -> list[str]:
        return self.forward if direction(problem) == "forward" else self.backward


PAPER_VARIANTS = DirectionVariants.model_construct(forward=["hopper-pack-fa-fwd"],
                                                  backward=["hopper-pack-fa-bwd", "hopper-pack-fa-bwd-fwd"])
"""The authors keep failures of hopper-07 / hopper-08 on forward and hopper-012 / hopper-013 on backward problems
(FWD_PROMPT_TAGS, BWD_PROMPT_TAGS in filter_fixit_error_kernels_by_prompt_tag.py, zhang677/PTXBench at 491860bd);
hub.json builds them as hopper-no-hint plus one pattern (fa3_fwd_v0 / v1; fa3_bwd_2ker, fa3_bwd_2ker_fwd_v0). Ours:
the unguided full pack plus our forward schedule (one, where they have two) or our backward principles."""



class Template(StrEnum):
    """Which SFT rows a build makes."""

    FIXIT = "fixit"
    """Five messages: system, task, wrong answer, its feedback, reasoning + the repaired kernel."""
    KERNELGEN = "kernelgen"
    """Three messages: system, task, reasoning + a strong model's correct answer."""


class BalancePoint(StrEnum):
    """Where the per-problem cap applies."""

    PRE = "pre"
    """On the failures, before repair (the paper's Pre-balanced recipes)."""
    POST = "post"
    """On the (wrong, fixed) pairs, after repair (Post-balanced)."""
    NONE = "none"
    """No cap: everything that passes the filters (the Extended recipes)."""


class TargetCredit(StrEnum):
    """Which target indicator a kept turn must satisfy (issue 25)."""

    WORK = "work"
    """The strict one: the target path carried the problem's work (evidence `carries`; unknown is not enough)."""
    EXECUTED = "executed"
    """The paper's: a target instruction executed (counts the dummy-instruction and profiler-only hacks too)."""


def target_credited(turn: TurnRecord, credit: TargetCredit) -> bool:
    """Whether the turn earns the target credit under `credit`."""
    if credit is TargetCredit.WORK:
        return turn.target_work is TargetWork.CARRIES
    return turn.target_instruction is TargetInstruction.EXECUTED


class SelectionSpec(FrozenModel):
    """Every parameter of the selection; recorded with the build (resolved names, never keywords)."""

    source_campaigns: list[str] = Field(min_length=1)
    """Campaign ids whose turns are mined (all in the build's warehouse)."""
    source_model: str | None = None
    """Only turns of this litellm model string (None: every model of the source campaigns)."""
    failure_labels: list[EvaluationStatus] = Field(default_factory=lambda: list(DEFAULT_FAILURES))
    """Turn statuses that count as failures to repair (Fixit)."""
    require_closed_fence: bool = True
    """Keep only answers whose text ends with a closing code fence (a truncated answer is no kernel)."""
    source_turns: tuple[int, int] = (0, 4)
    """Inclusive window of 0-based source turns."""
    prompt_variants: list[str] | Literal["pattern-hinted", "paper-hinted"] | DirectionVariants | None = PATTERN_HINTED
    """Prompt variant names, `pattern-hinted`, `paper-hinted` (the authors' per-direction variants), a
    {forward: [...], backward: [...]} mapping, or None for every variant."""
    problems: Literal["4ops", "8ops"] | list[str] = "8ops"
    """Problem scope: a named scope or a list of definition names."""
    per_problem_cap: int | None = Field(default=33, ge=1)
    """Items kept per problem at the balancing point (None: no cap)."""
    balance: BalancePoint = BalancePoint.PRE
    """Where the cap applies."""
    strata: list[Stratum] = Field(default_factory=lambda: ["error_type", "turn"])
    """Keys of the strata the cap is allocated over, proportionally (largest remainder)."""
    allow_underfilled: bool = False
    """A problem with fewer items than the cap keeps them all instead of failing the build."""
    seed: int | None = None
    """Order inside a stratum: None = stable key order (the reference's rule); an int = sha256(seed, key) order."""
    min_speedup: float = Field(default=0.0, ge=0.0)
    """KernelGen: keep correct turns with speedup strictly above this."""
    target_credit: TargetCredit = TargetCredit.WORK
    """KernelGen: the target indicator a correct turn must satisfy (`executed`: the paper's)."""

    @field_validator("failure_labels")
    @classmethod
    def _labels(cls, v: list[EvaluationStatus]) -> list[EvaluationStatus]:
        bad = [s.value for s in v if s in NOT_FAILURES]
        if bad:
            raise ValueError(f"not a failure label: {', '.join(bad)}")
        if not v:
            raise ValueError("at least one failure label is needed")
        return v

    @field_validator("problems")
    @classmethod
    def _problems(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, str):
            return v
        from ptxcore.problems import ProblemNotFoundError, get_problem

        if len(set(v)) != len(v) or not v:
            raise ValueError("list each problem once (at least one)")
        for name in v:
            try:
                get_problem(name)
            except ProblemNotFoundError as exc:
                raise ValueError(str(exc)) from None
        return v

    @field_validator("prompt_variants")
    @classmethod
    def _variants(cls, v: object) -> object:
        return _known_variants(v) if isinstance(v, list) else v

    @field_validator("source_turns")
    @classmethod
    def _window(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] < 0 or v[1] < v[0]:
            raise ValueError("source_turns must be [first, last] with 0 <= first <= last")
        return v

    @field_validator("strata")
    @classmethod
    def _strata(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a stratum key is listed twice")
        return v

    @model_validator(mode="after")
    def _cap_needs_balance(self) -> SelectionSpec:
        if self.balance is BalancePoint.NONE and self.per_problem_cap is not None:
            raise ValueError("balance: none keeps everything; set per_problem_cap: null (or balance: pre/post)")
        if self.balance is not BalancePoint.NONE and self.per_problem_cap is None:
            raise ValueError(f"balance: {self.balance.value} needs a per_problem_cap")
        return self

    def problem_names(self) -> list[str]:
        """The scope as definition names."""
        return list(SCOPES[self.problems]) if isinstance(self.problems, str) else list(self.problems)

    def resolved(self, variants: list[str] | DirectionVariants) -> SelectionSpec:
        """The spec with keywords replaced by names (this is what a build records)."""
        return self.model_copy(update={"problems": self.problem_names(), "prompt_variants": variants})


def pattern_hinted_variants() -> list[str]:
    """Every prompt variant (any architecture, any language) whose level names at least one pattern."""
    from ptxcore.prompts import all_variants

    return sorted(name for name, v in all_variants().items() if v.level.patterns)


def resolve_variants(spec: SelectionSpec) -> list[str] | DirectionVariants | None:
    """The variants the spec admits: names, names per direction, or None (every variant)."""
    if spec.prompt_variants == PATTERN_HINTED:
        return pattern_hinted_variants()
    if spec.prompt_variants == PAPER_HINTED:
        return PAPER_VARIANTS
    if isinstance(spec.prompt_variants, DirectionVariants) or spec.prompt_variants is None:
        return spec.prompt_variants
    return list(spec.prompt_variants)


def admitted_variants(variants: Sequence[str] | DirectionVariants | None, problem: str) -> set[str] | None:
    """The variants a turn of `problem` may come from (None: any)."""
    if variants is None:
        return None
    return set(variants.admitted(problem)) if isinstance(variants, DirectionVariants) else set(variants)
