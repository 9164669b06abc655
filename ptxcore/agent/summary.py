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

NOT_JUDGED = "not evaluated"
"""GPU columns of a row none of whose compiled turns a GPU judged: said in words, never a dash (the GPU-judged
column says why: no GPU, or infrastructure errors)."""
NO_TURN = "n/a"
"""A ratio or best speedup with nothing to take it over (no compiled turn, no correct turn)."""
RECORDED = "recorded"
"""Marks numbers that rest on verdicts reused from recorded judgements rather than measured in this run."""


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
    infra_errors: int = 0
    """Compiled turns whose judging failed for infrastructure reasons (INFRA_ERROR; part of not_evaluated)."""
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
    recorded: int = 0
    """GPU-judged turns whose verdict was reused from a recorded judgement (not measured in this run)."""
    recorded_from: list[str] = Field(default_factory=list)
    """Where the reused verdicts were measured ("GPU, driver, date"), distinct, sorted."""


def recorded_source(record: TurnRecord) -> str | None:
    """Where a reused verdict was measured ("GPU, driver, date"), or None for a verdict measured by this
    campaign's judge (JudgeResult.recorded, set by the recorded-verdict judge backend)."""
    rec = record.judge.recorded if record.judge is not None else None
    return rec.label if rec is not None else None


def _pct(n: int, d: int, compact: bool = False) -> str:
    if not d:
        return NO_TURN
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
        sources = [src for r in judged if (src := recorded_source(r)) is not None]
        rows.append(HeadlineRow(
            model=model, arch=arch, trajectories=len(by_traj), turns=len(recs),
            extraction_errors=sum(r.status is EvaluationStatus.EXTRACTION_ERROR for r in recs),
            compiled=len(compiled), gpu_judged=len(judged), not_evaluated=len(compiled) - len(judged),
            infra_errors=sum(r.status is EvaluationStatus.INFRA_ERROR for r in compiled),
            correct=len(correct), target_correct=len(target),
            trajectories_correct=len({r.trajectory_id for r in correct}),
            trajectories_target_correct=len({r.trajectory_id for r in target}),
            best_speedup=max(speedups) if speedups else None, stop_reasons=dict(stops.get((model, arch), {})),
            recorded=len(sources), recorded_from=sorted(set(sources)),
        ))
    return rows


HEADER = ["model", "arch", "trajectories", "turns", "extracted", "compiled", "GPU-judged", "correct turns",
          "correct + target executed", "trajectories solved", "best speedup"]


SHORT_HEADER = ["model", "arch", "traj.", "turns", "extracted", "compiled", "GPU-judged", "correct",
                "correct+target", "solved", "best speedup"]
"""HEADER in a terminal-friendly form (same columns)."""


GPU_COLUMNS = 5
"""The last five columns (GPU-judged .. best speedup) exist only through a GPU judge."""


def _marker(row: HeadlineRow) -> str:
    if not row.recorded:
        return ""
    return f" {RECORDED}" if row.recorded == row.gpu_judged else f" ({row.recorded} {RECORDED})"


def headline_cells(row: HeadlineRow, compact: bool = False) -> list[str]:
    """The row's cells: GPU columns read NOT_JUDGED when no GPU judged any compiled turn, and carry the
    RECORDED marker when they rest on reused verdicts."""
    judged = row.gpu_judged

    def pct(n: int, d: int) -> str:
        return _pct(n, d, compact)

    cells = [row.model, row.arch, str(row.trajectories), str(row.turns),
             pct(row.turns - row.extraction_errors, row.turns), pct(row.compiled, row.turns)]
    if not judged and row.not_evaluated:
        why = f"{row.infra_errors} infra errors" if row.infra_errors else "no GPU"
        return cells + [f"{pct(0, row.compiled)} ({why})"] + [NOT_JUDGED] * (GPU_COLUMNS - 1)
    mark = _marker(row)
    best = f"{row.best_speedup:.2f}x" if row.best_speedup is not None else NO_TURN
    return cells + [pct(judged, row.compiled) + mark, pct(row.correct, judged) + mark,
                    pct(row.target_correct, judged) + mark,
                    pct(row.trajectories_correct, row.trajectories) + mark if judged else NO_TURN,
                    best + mark if row.best_speedup is not None else best]


SOLVED_NOTE = ("\"solved\" (trajectories solved): trajectories with at least one correct (PASSED) turn, at any speedup; "
               "the target speedup only ends a trajectory early.")
"""What the solved column counts, printed under every headline that shows it."""


def headline_notes(rows: list[HeadlineRow]) -> list[str]:
    """Sentences under the table: what "solved" counts, turns nobody judged, and where reused verdicts come from."""
    notes = [SOLVED_NOTE] if any(r.gpu_judged for r in rows) else []
    not_eval = sum(r.not_evaluated for r in rows)
    if not_eval:
        notes.append(f"{not_eval} compiled turns were NOT_EVALUATED: no GPU judge gave a verdict, so they carry no "
                     f"correctness or timing (a row without any GPU verdict reads \"{NOT_JUDGED}\").")
    recorded = sum(r.recorded for r in rows)
    if recorded:
        sources = sorted({s for r in rows for s in r.recorded_from})
        notes.append(f"{recorded} of {sum(r.gpu_judged for r in rows)} GPU verdicts are {RECORDED}: reused from earlier "
                     "judgements of the same kernel, problem, workload and architecture, not measured in this run "
                     f"({'; '.join(sources)}).")
    return notes


def headline_columns(rows: list[HeadlineRow]) -> list[dict[str, str]]:
    """The headline turned on its side for a UI page: one row per measure, one column per (model, arch) ("model ·
    arch"), compact cells. Eleven measures side by side did not fit Prefect's artifact view at 1400 px."""
    cells = [headline_cells(r, compact=True) for r in rows]
    names = [f"{r.model} · {r.arch}" for r in rows]
    return [{"measure": measure, **{name: c[i] for name, c in zip(names, cells, strict=True)}}
            for i, measure in enumerate(HEADER) if i >= 2]


def headline_markdown(rows: list[HeadlineRow], on_its_side: bool = False) -> str:
    """GitHub-style table plus the notes on unjudged turns and reused verdicts; `on_its_side`: headline_columns'
    layout (Prefect's artifact view)."""
    if on_its_side:
        table = headline_columns(rows)
        keys = list(table[0]) if table else ["measure"]
        lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(r[k] for k in keys) + " |" for r in table]
    else:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(headline_cells(r)) + " |" for r in rows]
    notes = headline_notes(rows)
    return "\n".join(lines + ([""] + notes if notes else []))


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
    mlflow_ui_path: str = ""
    """Where the MLflow UI shows the experiment's runs, relative to the UI's address
    (`#/experiments/<id>?workflowType=machine_learning`; MLflow 3.17 otherwise opens its GenAI pages)."""
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
