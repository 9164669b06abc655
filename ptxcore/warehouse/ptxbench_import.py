"""Import the PTXBench authors' published per-turn results (`ptxbench_per_turn.csv`, shipped compressed as
data/ptxbench/ptxbench_per_turn.csv.gz; plain and `.gz` files are read alike) into the warehouse.

One run (= one campaign here) per `exp_dir`, named by its last path component. Each CSV row becomes a
TurnRecord; the row itself is also kept verbatim in `ptxbench_source_turns` (correctness category,
SASS tags, correct_with_arch, reasoning-token source, performance score).

Status mapping (the authors' classifier reads the evaluator's feedback text):

| CSV correctness            | EvaluationStatus      | why                                                    |
|----------------------------|-----------------------|--------------------------------------------------------|
| Correct                    | PASSED                |                                                        |
| Compilation error          | COMPILE_ERROR         |                                                        |
| Runtime error              | RUNTIME_ERROR         |                                                        |
| Numerical error            | INCORRECT_NUMERICAL   |                                                        |
| Kernel Execution Timeout   | TIMEOUT               | the kernel (or memcheck of it) ran out of time         |
| Extraction error           | EXTRACTION_ERROR      | no code block in the answer                            |
| Profiling Service Timeout  | INFRA_ERROR           | evaluator process killed (returncode 137): the service |
| Sanitize Timeout           | INFRA_ERROR           | client gave up waiting for the sanitize job (queue)    |
| Other error                | RUNTIME_ERROR         | unclassified evaluator failure; category kept verbatim |

INFRA_ERROR turns are turns the model played (the trajectory continued after them), so the metrics
count them as played, not correct, exactly like the authors' tables. Target instruction: `executed`
when correct_with_arch = 1; `not_executed` for a correct turn with correct_with_arch = 0 (the authors
ran their SASS check on every correct turn; absent and not-executed are not told apart in the CSV);
`unknown` for turns that were not correct (never checked). Speedup is kept for correct turns only
(the CSV writes 0.0 elsewhere). Prompt variant: the authors' launcher numbers trajectories in config
order, `num_trajectories` (4 in every published config) per prompt tag, so exp_NNN belongs to variant
`p{NNN // 4}`; the prompt tags themselves are not in the CSV.
"""

from __future__ import annotations

import csv
import gzip
import logging
import re
import zlib
from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache
from pathlib import PurePosixPath
from typing import IO, Any

from ptxcore.schema import (
    CampaignRecord,
    EnvironmentInfo,
    EvaluationStatus,
    LLMUsage,
    StopReason,
    TargetInstruction,
    TrajectoryRecord,
    TurnRecord,
)

from .store import Warehouse

log = logging.getLogger(__name__)

CATEGORY_STATUS: dict[str, EvaluationStatus] = {
    "Correct": EvaluationStatus.PASSED,
    "Compilation error": EvaluationStatus.COMPILE_ERROR,
    "Runtime error": EvaluationStatus.RUNTIME_ERROR,
    "Numerical error": EvaluationStatus.INCORRECT_NUMERICAL,
    "Kernel Execution Timeout": EvaluationStatus.TIMEOUT,
    "Extraction error": EvaluationStatus.EXTRACTION_ERROR,
    "Profiling Service Timeout": EvaluationStatus.INFRA_ERROR,
    "Sanitize Timeout": EvaluationStatus.INFRA_ERROR,
    "Other error": EvaluationStatus.RUNTIME_ERROR,
}
"""The authors' correctness categories mapped onto our statuses (see the module docstring)."""

REQUIRED_COLUMNS = (
    "model", "arch", "required_arch_tag", "workload", "workload_name", "definition", "exp_dir",
    "trajectory_id", "turn", "reasoning_tokens", "reasoning_token_source", "correctness", "speedup",
    "arch_tag", "correct_with_arch", "performance_score",
)
TRAJECTORIES_PER_VARIANT = 4
"""Trajectories per prompt tag in every published PTXBench config."""
TARGET_SPEEDUP = 1.2
"""The authors' early-stop target (a trajectory reaching it ended early)."""
IMPORTED_GPU = "unrecorded"
"""The CSV does not say which GPU model judged a run (only the architecture)."""


_NO_ENVIRONMENT = EnvironmentInfo()
"""One shared (empty) environment for every imported turn: the CSV records none."""


class PTXBenchImportError(ValueError):
    """The CSV is not the published per-turn format; the message names the file, line and field."""


@lru_cache(maxsize=4096)
def run_name(exp_dir: str) -> str:
    """A run's name: the last path component of its exp_dir."""
    name = PurePosixPath(exp_dir.rstrip("/")).name
    if not name:
        raise PTXBenchImportError(f"empty exp_dir {exp_dir!r}")
    return name


def target_verdict(status: EvaluationStatus, correct_with_arch: int) -> TargetInstruction:
    if status is not EvaluationStatus.PASSED:
        return TargetInstruction.UNKNOWN
    return TargetInstruction.EXECUTED if correct_with_arch == 1 else TargetInstruction.NOT_EXECUTED


def variant_of(trajectory_id: str, per_variant: int = TRAJECTORIES_PER_VARIANT) -> tuple[str, int]:
    """(prompt variant, index within the variant) of an authors' trajectory id like exp_007."""
    m = re.search(r"(\d+)$", trajectory_id)
    if m is None:
        raise PTXBenchImportError(f"trajectory_id {trajectory_id!r} has no trailing number")
    n = int(m.group(1))
    return f"p{n // per_variant}", n % per_variant


def _parse(row: dict[str, str], where: str) -> tuple[TurnRecord, dict[str, Any]]:
    def num(field: str, conv: Callable[[str], Any]) -> Any:
        try:
            return conv(row[field])
        except (TypeError, ValueError) as exc:
            raise PTXBenchImportError(f"{where}: bad {field} {str(row[field])[:80]!r}") from exc

    category = row["correctness"]
    if category not in CATEGORY_STATUS:
        raise PTXBenchImportError(f"{where}: unknown correctness category {category[:80]!r}")
    status = CATEGORY_STATUS[category]
    run, cwa = run_name(row["exp_dir"]), num("correct_with_arch", int)
    speedup = num("speedup", float)
    variant, _ = variant_of(row["trajectory_id"])
    rec = TurnRecord(
        environment=_NO_ENVIRONMENT, campaign_id=run, trajectory_id=row["trajectory_id"], turn=num("turn", int), model=row["model"],
        arch=row["arch"], gpu=IMPORTED_GPU, prompt_variant=variant, problem=row["definition"],
        usage=LLMUsage(reasoning_tokens=num("reasoning_tokens", int)), status=status,
        target_instruction=target_verdict(status, cwa),
        speedup=speedup if status is EvaluationStatus.PASSED else None,
    )
    source = {
        "campaign_id": run, "trajectory_id": row["trajectory_id"], "turn": rec.turn, "exp_dir": row["exp_dir"],
        "workload_uuid": row["workload"], "workload_name": row["workload_name"],
        "required_arch_tag": row["required_arch_tag"], "correctness": category, "speedup": speedup,
        "arch_tag": row["arch_tag"] or None, "correct_with_arch": cwa,
        "reasoning_token_source": row["reasoning_token_source"],
        "performance_score": num("performance_score", float),
    }
    return rec, source


def _trajectories(turns: list[TurnRecord]) -> list[TrajectoryRecord]:
    """One TrajectoryRecord per (run, trajectory); budget = the run's longest trajectory."""
    by_traj: dict[tuple[str, str], list[TurnRecord]] = defaultdict(list)
    budget: dict[str, int] = defaultdict(int)
    for t in turns:
        by_traj[(t.campaign_id, t.trajectory_id)].append(t)
        budget[t.campaign_id] = max(budget[t.campaign_id], t.turn + 1)
    out = []
    for (run, tid), ts in sorted(by_traj.items()):
        speeds = [t.speedup for t in ts if t.status is EvaluationStatus.PASSED and t.speedup is not None]
        best = max(speeds) if speeds else None
        if best is not None and best >= TARGET_SPEEDUP:
            stop = StopReason.TARGET_REACHED
        elif len(ts) >= budget[run]:
            stop = StopReason.MAX_TURNS
        else:
            stop = StopReason.UNKNOWN
        variant, index = variant_of(tid)
        first = ts[0]
        out.append(TrajectoryRecord(
            campaign_id=run, trajectory_id=tid, model=first.model, arch=first.arch, prompt_variant=variant,
            problem=first.problem, index=index, max_turns=budget[run], num_turns=len(ts), stop_reason=stop,
            best_speedup=best,
        ))
    return out


Parsed = tuple[list[TurnRecord], list[dict[str, Any]]]
"""The TurnRecords of a per-turn file and its rows verbatim."""


def _open_text(path: str) -> IO[str]:
    """The file as UTF-8 text; `.gz` files (the shipped data/ptxbench/ptxbench_per_turn.csv.gz) decompressed."""
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")  # noqa: SIM115 - closed by the caller's `with`


def read_ptxbench_csv(path: str) -> Parsed:
    """Parse the per-turn CSV (plain or gzip-compressed) into TurnRecords and verbatim source rows; errors name the
    file (and the line where there is one) in one line."""
    try:
        with _open_text(path) as fh:
            return _read_rows(csv.DictReader(fh), path)
    except gzip.BadGzipFile as exc:
        raise PTXBenchImportError(f"{path}: not a gzip file ({exc})") from None
    except EOFError:
        raise PTXBenchImportError(f"{path}: compressed data ends early (a cut download?)") from None
    except UnicodeDecodeError as exc:
        raise PTXBenchImportError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except zlib.error as exc:
        raise PTXBenchImportError(f"{path}: unreadable: {exc}") from None
    except OSError as exc:
        raise PTXBenchImportError(f"{path}: cannot read: {exc.strerror}") from None


def _read_rows(reader: csv.DictReader, path: str) -> Parsed:
    turns, sources = [], []
    try:
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise PTXBenchImportError(f"{path}: missing columns {', '.join(missing)}")
        for row in reader:
            rec, src = _parse(row, f"{path}:{reader.line_num}")
            turns.append(rec)
            sources.append(src)
    except csv.Error as exc:  # a field over csv.field_size_limit(), a NUL byte, a stray quote ...
        raise PTXBenchImportError(f"{path}:{reader.line_num + 1}: not a valid CSV row: {exc}") from None
    if not turns:
        raise PTXBenchImportError(f"{path}: no rows")
    return turns, sources


def import_ptxbench_csv(wh: Warehouse, path: str, parsed: Parsed | None = None) -> dict[str, int]:
    """Import the CSV (idempotent: re-importing replaces the same keys). Returns counts. `parsed`: the file already
    read by read_ptxbench_csv (the CLI reads it before it creates the warehouse, so a bad file writes nothing)."""
    turns, sources = parsed or read_ptxbench_csv(path)
    trajectories = _trajectories(turns)
    runs = sorted({t.campaign_id for t in turns})
    wh.upsert_campaigns([CampaignRecord(campaign_id=r, name=r) for r in runs])
    wh.upsert_trajectories(trajectories)
    n = wh.upsert_turns(turns)
    wh.upsert_rows("ptxbench_source_turns", sources)
    log.info("imported %d turns, %d trajectories, %d runs from %s", n, len(trajectories), len(runs), path)
    return {"runs": len(runs), "trajectories": len(trajectories), "turns": n}
