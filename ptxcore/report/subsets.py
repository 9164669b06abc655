"""Which trajectories of a run a table counts (`--trajectories`): all, the first N, or some prompt variants.

Why this exists: the PTXBench authors' SFT evaluation runs (s0-s6, and the base Qwen3.6-27B runs on
Hopper) hold 20 trajectories, while the paper's Tables 8 / 9 are over 12 (3 prompt variants x 4
trajectories). The authors' launcher numbers trajectories in config-file order, four per prompt tag,
and their final-evaluation configs list exactly three prompt tags, so the paper's 12 are exp_000 -
exp_011: `first:12`, which on imported runs is the same set as `variants:p0,p1,p2` (the importer names
exp_NNN's variant p{NNN // 4}). exp_012 - exp_019 are left over from an earlier, longer plan of the
same output root; the authors' plot-viewer exports include them ("all available trajectories"), which
is why those exports show 20. See ptxcore/report/README_adapt.md for the evidence and what was verified.

Spellings: `all` | `first:N` (the first N trajectory ids of each run, in natural order: exp_2 < exp_10)
| `variants:A,B,...` (only trajectories of these prompt variants).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import Field, model_validator

from ptxcore.metrics import TurnOutcome
from ptxcore.schema import FrozenModel

_NUM = re.compile(r"(\d+)")


class SubsetKind(StrEnum):
    """How trajectories are chosen."""

    ALL = "all"
    """Every recorded trajectory."""
    FIRST = "first"
    """The first N trajectory ids of each run."""
    VARIANTS = "variants"
    """Trajectories of the listed prompt variants."""


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
        return "all"

    def select(self, outcomes: Iterable[TurnOutcome]) -> list[TurnOutcome]:
        """The outcomes of the chosen trajectories (order kept)."""
        outcomes = list(outcomes)
        if self.kind is SubsetKind.ALL:
            return outcomes
        if self.kind is SubsetKind.VARIANTS:
            wanted = set(self.variants)
            return [o for o in outcomes if o.prompt_variant in wanted]
        by_run: dict[str, set[str]] = defaultdict(set)
        for o in outcomes:
            by_run[o.run].add(o.trajectory_id)
        keep = {(run, t) for run, ids in by_run.items() for t in sorted(ids, key=natural_key)[: self.first_n]}
        return [o for o in outcomes if (o.run, o.trajectory_id) in keep]


def natural_key(text: str) -> tuple:
    """Sort key that orders embedded numbers numerically (exp_2 before exp_10)."""
    return tuple(int(p) if p.isdigit() else p for p in _NUM.split(text))


class SubsetError(ValueError):
    """A `--trajectories` value that does not parse (one line)."""


def parse_subset(text: str) -> TrajectorySubset:
    """`all`, `first:N` or `variants:A,B,...`."""
    kind, _, arg = text.strip().partition(":")
    try:
        if kind == "all" and not arg:
            return TrajectorySubset()
        if kind == "first" and arg.isdigit():
            return TrajectorySubset(kind=SubsetKind.FIRST, first_n=int(arg))
        if kind == "variants" and arg:
            return TrajectorySubset(kind=SubsetKind.VARIANTS, variants=[v.strip() for v in arg.split(",") if v.strip()])
    except ValueError as exc:
        raise SubsetError(f"--trajectories {text!r}: {str(exc).splitlines()[-1].strip()}") from None
    raise SubsetError(f"--trajectories {text!r}: use all, first:N (N >= 1) or variants:A,B,...")


def trajectory_counts(outcomes: Sequence[TurnOutcome]) -> dict[str, int]:
    """Trajectories per run (for the report's notes)."""
    runs: dict[str, set[str]] = defaultdict(set)
    for o in outcomes:
        runs[o.run].add(o.trajectory_id)
    return {r: len(t) for r, t in sorted(runs.items())}
