"""FlashInfer-Trace interchange: export a campaign's evaluations as a dataset folder, import one.

Dataset layout written: FlashInfer-Trace's (ptxcore.problems.traceset), one trace per judged turn.

Exported: every turn with a judge envelope and kernel text, except NOT_EVALUATED and INFRA_ERROR (no
verdict about the kernel exists). REJECTED and REWARD_HACK are our status extensions and are kept.
Import reads any such folder (also `problems/`): `*.json` under definitions/ and solutions/, `*.jsonl`
under workloads/ and traces/, at any depth; every line is validated and an error names file and line, never
quoting the file. A symbolic link anywhere in the folder is refused (a dataset folder may come from anyone: a link
would read a file outside it), and so is a file over MAX_FILE_BYTES. Export writes below `--out` without
following links (`ptxcore.schema.files.write_tree`).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from ptxcore.problems import Problem, ProblemNotFoundError, get_problem, traceset
from ptxcore.problems.traceset import JudgedKernel, TraceSetWriter, validation_summary
from ptxcore.schema import Definition, EvaluationStatus, Solution, Trace, TurnRecord, text_sha256
from ptxcore.schema.files import InputFileError, read_text, regular_files

from .store import Warehouse, WarehouseError

_NO_VERDICT = {EvaluationStatus.NOT_EVALUATED, EvaluationStatus.INFRA_ERROR}
MAX_FILE_BYTES = 256 << 20
"""Largest dataset file read (a traces file of a full paper grid is tens of MB)."""


class InterchangeError(ValueError):
    """A dataset file is not valid FlashInfer-Trace; the message names file and line."""


def judged_kernel(rec: TurnRecord) -> JudgedKernel:
    assert rec.judge is not None and rec.kernel_text is not None
    return JudgedKernel(author=rec.model, kernel_text=rec.kernel_text, judge=rec.judge, created_at=rec.created_at,
                        description=f"campaign {rec.campaign_id}, trajectory {rec.trajectory_id}, turn {rec.turn}",
                        hardware=rec.gpu or rec.arch)


def solution_of(rec: TurnRecord) -> Solution:
    return traceset.solution_of(judged_kernel(rec))


def trace_of(rec: TurnRecord, problem: Problem, solution: Solution) -> Trace:
    return traceset.trace_of(judged_kernel(rec), problem, solution)


def export_campaign_traces(wh: Warehouse, campaign_id: str, out_dir: Path,
                           problems_root: Path | None = None) -> dict[str, int]:
    """Write the campaign's judged turns as a FlashInfer-Trace dataset folder; returns counts."""
    turns = wh.turns(campaign_id)
    if not turns:
        raise WarehouseError(f"campaign {campaign_id!r} has no turns")
    writer, skipped = TraceSetWriter(), 0
    for rec in turns:
        if rec.judge is None or rec.kernel_text is None or rec.judge.status in _NO_VERDICT:
            skipped += 1
            continue
        try:
            writer.add(judged_kernel(rec), writer.problems.get(rec.problem) or get_problem(rec.problem, problems_root))
        except ProblemNotFoundError:  # problem or workload not in this catalog
            skipped += 1
    try:
        writer.write(Path(out_dir))
    except InputFileError as exc:
        raise InterchangeError(f"--out: {exc}") from None
    return {"traces": writer.count, "solutions": len(writer.solutions), "definitions": len(writer.problems),
            "skipped_turns": skipped}


def _json_files(root: Path, sub: str, suffix: str) -> list[Path]:
    base = root / sub
    if base.is_symlink():
        raise InterchangeError(f"{base}: is a symbolic link (refused: a dataset folder is read without following links)")
    try:
        return regular_files(base, suffix) if base.is_dir() else []
    except InputFileError as exc:
        raise InterchangeError(str(exc)) from None


def _text(path: Path) -> str:
    try:
        return read_text(path, MAX_FILE_BYTES, follow_symlinks=False)
    except InputFileError as exc:
        raise InterchangeError(str(exc)) from None


def _lines(path: Path):
    for i, line in enumerate(_text(path).splitlines(), start=1):
        if line.strip():
            yield f"{path}:{i}", line


def _validate(model, text: str, where: str):
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise InterchangeError(f"{where}: invalid {model.__name__}: {validation_summary(exc)}") from None
    except ValueError as exc:  # pydantic-core's own JSON errors (a number too long to convert, ...)
        raise InterchangeError(f"{where}: invalid {model.__name__}: {str(exc).splitlines()[0][:200]}") from None


def _trace_row(tr: Trace, line: str) -> dict:
    ev, perf = tr.evaluation, tr.evaluation.performance if tr.evaluation else None
    return {"trace_sha256": text_sha256(line), "definition": tr.definition,
            "workload_uuid": tr.workload.uuid, "solution": tr.solution,
            "status": ev.status.value if ev else None, "hardware": ev.environment.hardware if ev else None,
            "latency_ms": perf.latency_ms if perf else None,
            "reference_latency_ms": perf.reference_latency_ms if perf else None,
            "speedup_factor": perf.speedup_factor if perf else None,
            "timestamp": ev.timestamp if ev else None, "raw_json": line}


def import_dataset(wh: Warehouse, root: Path) -> dict[str, int]:
    """Load definitions, workloads, solutions and traces of a FlashInfer-Trace folder into fi_* tables."""
    root = Path(root)
    if not root.is_dir():
        raise InterchangeError(f"{root} is not a directory")
    defs, wls, sols, trs = [], [], [], []
    for path in _json_files(root, "definitions", ".json"):
        d = _validate(Definition, _text(path), str(path))
        defs.append({"name": d.name, "op_type": d.op_type, "raw_json": d.model_dump_json()})
    for path in _json_files(root, "workloads", ".jsonl"):
        for where, line in _lines(path):
            t = _validate(Trace, line, where)
            wls.append({"definition": t.definition, "uuid": t.workload.uuid,
                        "axes_json": json.dumps(t.workload.axes), "raw_json": t.workload.model_dump_json()})
    for path in _json_files(root, "solutions", ".json"):
        s = _validate(Solution, _text(path), str(path))
        sols.append({"name": s.name, "definition": s.definition, "author": s.author,
                     "language": s.spec.language.value, "content_sha256": s.content_sha256(),
                     "raw_json": s.model_dump_json()})
    for path in _json_files(root, "traces", ".jsonl"):
        for where, line in _lines(path):
            trs.append(_trace_row(_validate(Trace, line, where), line))
    for table, rows in (("fi_definitions", defs), ("fi_workloads", wls), ("fi_solutions", sols), ("fi_traces", trs)):
        wh.upsert_rows(table, rows)
    return {"definitions": len(defs), "workloads": len(wls), "solutions": len(sols), "traces": len(trs)}
