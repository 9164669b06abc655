"""Which trajectories of a run a table counts (`--trajectories`): all, the first N, some prompt variants, or
the paper's choice.

Why this exists: the PTXBench authors' evaluation runs of the SFT checkpoints s0-s6 (and of base Qwen3.6-27B on
Hopper) hold 20 trajectories: five prompt variants x 4 (their launcher numbers trajectories in config order, four
per prompt tag, so exp_NNN is variant p{NNN // 4}). The paper's cells are over 12: three variants x 4, and not
the same three for every problem. Matching every cell of the paper's Tables 8 and 9 against every choice of 3
of the 5 variants, per problem and model, leaves exactly one choice per problem family (docs/adapt-reports.md):

    gemm_n7168_k5120                              p0, p1, p4
    mha_with_lse_d128, mha_with_lse_d128_causal   p0, p1, p2
    mha_bwd_d128, mha_bwd_d128_causal             p0, p3, p4

`paper` applies that choice to runs that hold more than three variants; runs with three or fewer (the 12-
trajectory runs of the other models and of the retrieval conditions) are kept whole. It refuses a run of
five variants on a problem outside these five (no evidence for it).

Spellings: `all` | `first:N` (the first N trajectory ids of each run, in natural order: exp_2 < exp_10)
| `variants:A,B,...` (only trajectories of these prompt variants) | `paper`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import Field, model_validator

from ptxcore.metrics import TurnOutcome
from ptxcore.schema import FrozenModel

from .tables import ReportError

_NUM = re.compile(r"(\d+)")


class SubsetKind(StrEnum):
    """How trajectories are chosen."""

    ALL = "all"
    """Every recorded trajectory."""
    FIRST = "first"
    """The first N trajectory ids of each run."""
    VARIANTS = "variants"
    """Trajectories of the listed prompt variants."""
    PAPER = "paper"
    """The paper's three variants per problem family, for runs holding more than three variants."""


PAPER_VARIANTS: dict[str, tuple[str, ...]] = {
    "gemm_n7168_k5120": ("p0", "p1", "p4"),
    "mha_with_lse_d128": ("p0", "p1", "p2"), "mha_with_lse_d128_causal": ("p0", "p1", "p2"),
    "mha_bwd_d128": ("p0", "p3", "p4"), "mha_bwd_d128_causal": ("p0", "p3", "p4"),
}
"""The prompt variants (of five) behind the paper's cells, per problem (found from Tables 8 / 9)."""


class TrajectorySubset(FrozenModel):
    """A choice of trajectories per run."""

    kind: SubsetKind = SubsetKind.ALL
    """How they are chosen."""
    first_n: int | None = Field(default=None, ge=1)
    """N for `first`."""
    variants: list[str] = Field(default_factory=list)
    """Prompt variants for `variants`."""

    @model_validator(mode="after")
    def _consistent(self) -> TrajectorySubset:
        if (self.kind is SubsetKind.FIRST) != (self.first_n is not None):
            raise ValueError("first:N needs N, and only first takes one")
        if (self.kind is SubsetKind.VARIANTS) != bool(self.variants):
            raise ValueError("variants:A,B needs at least one variant, and only variants takes them")
        return self

    @property
    def label(self) -> str:
        if self.kind is SubsetKind.FIRST:
            return f"first:{self.first_n}"
        if self.kind is SubsetKind.VARIANTS:
            return "variants:" + ",".join(self.variants)
        return self.kind.value

    def select(self, outcomes: Iterable[TurnOutcome]) -> list[TurnOutcome]:
        """The outcomes of the chosen trajectories (order kept)."""
        outcomes = list(outcomes)
        if self.kind is SubsetKind.ALL:
            return outcomes
        if self.kind is SubsetKind.VARIANTS:
            wanted = set(self.variants)
            return [o for o in outcomes if o.prompt_variant in wanted]
        if self.kind is SubsetKind.PAPER:
            return _paper_subset(outcomes)
        by_run: dict[str, set[str]] = defaultdict(set)
        for o in outcomes:
            by_run[o.run].add(o.trajectory_id)
        keep = {(run, t) for run, ids in by_run.items() for t in sorted(ids, key=natural_key)[: self.first_n]}
        return [o for o in outcomes if (o.run, o.trajectory_id) in keep]


def _paper_subset(outcomes: list[TurnOutcome]) -> list[TurnOutcome]:
    variants: dict[str, set[str]] = defaultdict(set)
    for o in outcomes:
        variants[o.run].add(o.prompt_variant)
    keep: dict[str, set[str] | None] = {}
    for o in outcomes:
        if o.run in keep:
            continue
        if len(variants[o.run]) <= 3:
            keep[o.run] = None  # evaluated with three prompt variants: all of them count
        elif o.definition in PAPER_VARIANTS:
            keep[o.run] = set(PAPER_VARIANTS[o.definition])
        else:
            raise SubsetError(f"--trajectories paper: run {o.run} holds {len(variants[o.run])} prompt variants of "
                              f"{o.definition}, for which the paper's choice is not known; use all, first:N or "
                              "variants:A,B,...")
    return [o for o in outcomes if keep[o.run] is None or o.prompt_variant in keep[o.run]]


def natural_key(text: str) -> tuple:
    """Sort key that orders embedded numbers numerically (exp_2 before exp_10)."""
    return tuple(int(p) if p.isdigit() else p for p in _NUM.split(text))


class SubsetError(ReportError):
    """A `--trajectories` value that does not parse (one line)."""


def parse_subset(text: str) -> TrajectorySubset:
    """`all`, `first:N` or `variants:A,B,...`."""
    kind, _, arg = text.strip().partition(":")
    try:
        if kind == "all" and not arg:
            return TrajectorySubset()
        if kind == "paper" and not arg:
            return TrajectorySubset(kind=SubsetKind.PAPER)
        if kind == "first" and arg.isdigit():
            return TrajectorySubset(kind=SubsetKind.FIRST, first_n=int(arg))
        if kind == "variants" and arg:
            return TrajectorySubset(kind=SubsetKind.VARIANTS, variants=[v.strip() for v in arg.split(",") if v.strip()])
    except ValueError as exc:
        raise SubsetError(f"--trajectories {text!r}: {str(exc).splitlines()[-1].strip()}") from None
    raise SubsetError(f"--trajectories {text!r}: use all, paper, first:N (N >= 1) or variants:A,B,...")


def trajectory_counts(outcomes: Sequence[TurnOutcome]) -> dict[str, int]:
    """Trajectories per run (for the report's notes)."""
    runs: dict[str, set[str]] = defaultdict(set)
    for o in outcomes:
        runs[o.run].add(o.trajectory_id)
    return {r: len(t) for r, t in sorted(runs.items())}
