"""The campaign's headline table, computed from its turn records (pure; the flow renders it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import Field

from ptxcore.schema import (
    CompileStatus,
    EvaluationStatus,
    FrozenModel,
    TargetInstruction,
    TrajectoryRecord,
    TurnRecord,
)

DASH = "–"


class HeadlineRow(FrozenModel):
    """One (model, architecture) line of the headline table."""

    model: str
    """litellm model string."""
    arch: str
    """Architecture key."""
    trajectories: int = 0
    """Trajectories with at least one recorded turn."""
    turns: int = 0
    """Recorded turns."""
    extraction_errors: int = 0
    """Turns without a single code block."""
    compiled: int = 0
    """Turns whose kernel compiled on the CPU worker."""
    gpu_judged: int = 0
    """Compiled turns with a GPU verdict (not NOT_EVALUATED / INFRA_ERROR)."""
    not_evaluated: int = 0
    """Compiled turns that no GPU judged."""
    recorded: int = 0
    """Of the GPU-judged turns: verdicts reused from an earlier GPU judgement (judge route recorded:)."""
    correct: int = 0
    """PASSED turns."""
    target_correct: int = 0
    """PASSED turns whose target instructions were verified to execute."""
    trajectories_correct: int = 0
    """Trajectories with a PASSED turn."""
    trajectories_target_correct: int = 0
    """Trajectories with a PASSED turn whose target instructions executed."""
    best_speedup: float | None = None
    """Best speedup over correct turns."""
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    """Trajectories per stop reason."""


def _pct(n: int, d: int, compact: bool = False) -> str:
    if not d:
        return DASH
    return f"{n}/{d}" if compact else f"{n}/{d} ({100 * n / d:.0f}%)"


def headline_rows(turns: Iterable[TurnRecord], trajectories: Iterable[TrajectoryRecord] = ()) -> list[HeadlineRow]:
    groups: dict[tuple[str, str], list[TurnRecord]] = defaultdict(list)
    for t in turns:
        groups[(t.model, t.arch)].append(t)
    stops: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for tr in trajectories:
        stops[(tr.model, tr.arch)][tr.stop_reason.value] += 1
    rows = []
    for (model, arch), recs in sorted(groups.items()):
        by_traj: dict[str, list[TurnRecord]] = defaultdict(list)
        for r in recs:
            by_traj[r.trajectory_id].append(r)
        compiled = [r for r in recs if r.compile is not None and r.compile.status is CompileStatus.COMPILED]
        judged = [r for r in compiled if r.status.counts_against_model]
        correct = [r for r in recs if r.status is EvaluationStatus.PASSED]
        target = [r for r in correct if r.target_instruction is TargetInstruction.EXECUTED]
        speedups = [r.speedup for r in correct if r.speedup is not None]
        rows.append(HeadlineRow(
            model=model, arch=arch, trajectories=len(by_traj), turns=len(recs),
            extraction_errors=sum(r.status is EvaluationStatus.EXTRACTION_ERROR for r in recs),
            compiled=len(compiled), gpu_judged=len(judged), not_evaluated=len(compiled) - len(judged),
            recorded=sum(r.judge is not None and r.judge.recorded is not None for r in judged),
            correct=len(correct), target_correct=len(target),
            trajectories_correct=len({r.trajectory_id for r in correct}),
            trajectories_target_correct=len({r.trajectory_id for r in target}),
            best_speedup=max(speedups) if speedups else None, stop_reasons=dict(stops.get((model, arch), {})),
        ))
    return rows


HEADER = ["model", "arch", "trajectories", "turns", "extracted", "compiled", "GPU-judged", "correct turns",
          "correct + target executed", "trajectories solved", "best speedup"]


SHORT_HEADER = ["model", "arch", "traj.", "turns", "extracted", "compiled", "GPU-judged", "correct",
                "correct+target", "solved", "best speedup"]
"""HEADER in a terminal-friendly form (same columns)."""


def headline_cells(row: HeadlineRow, compact: bool = False) -> list[str]:
    judged = row.gpu_judged

    def pct(n: int, d: int) -> str:
        return _pct(n, d, compact)

    return [
        row.model, row.arch, str(row.trajectories), str(row.turns),
        pct(row.turns - row.extraction_errors, row.turns), pct(row.compiled, row.turns),
        pct(judged, row.compiled) if row.compiled else DASH,
        pct(row.correct, judged), pct(row.target_correct, judged),
        pct(row.trajectories_correct, row.trajectories) if judged else DASH,
        f"{row.best_speedup:.2f}x" if row.best_speedup is not None else DASH,
    ]


def headline_markdown(rows: list[HeadlineRow]) -> str:
    """GitHub-style table plus a line on turns nobody judged."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(headline_cells(r)) + " |" for r in rows]
    not_eval = sum(r.not_evaluated for r in rows)
    if not_eval:
        lines.append("")
        lines.append(f"{not_eval} compiled turns were NOT_EVALUATED: no GPU judge was available, so they "
                     "carry no correctness or timing (their correctness columns show – ).")
    return "\n".join(lines)


class CampaignSummary(FrozenModel):
    """What one run of a campaign did, and where its records are."""

    campaign_id: str
    """Campaign identity."""
    warehouse: str
    """DuckDB file."""
    mlflow_tracking_uri: str
    """MLflow store."""
    mlflow_experiment: str
    """Experiment name."""
    trajectories_planned: int = 0
    """Trajectories in the campaign."""
    trajectories_run: int = 0
    """Trajectories this run worked on (the rest were already complete)."""
    turns_planned_max: int = 0
    """Upper bound on turns: trajectories x turn budget (early stops make fewer)."""
    turns_recorded: int = 0
    """Turns in the warehouse for this campaign after this run."""
    turns_this_run: int = 0
    """Turns recorded by this run."""
    errors: list[str] = Field(default_factory=list)
    """Trajectories that ended with an error (rerun the campaign to resume them)."""
    judges: dict[str, str] = Field(default_factory=dict)
    """Judge backend per architecture (`none` = NOT_EVALUATED)."""
    headline: list[HeadlineRow] = Field(default_factory=list)
    """The headline table rows."""
    headline_markdown: str = ""
    """The headline table, rendered."""
