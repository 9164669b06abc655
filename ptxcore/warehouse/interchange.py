"""FlashInfer-Trace interchange: export a campaign's evaluations as a dataset folder, import one.

Dataset layout written (FlashInfer-Trace's):
    definitions/<op_type>/<definition>.json
    workloads/<op_type>/<definition>.jsonl                 workload traces (no solution, no evaluation)
    solutions/<author>/<op_type>/<definition>/<name>.json  one per distinct kernel text
    traces/<author>/<op_type>/<definition>.jsonl           one trace per judged turn

Exported: every turn with a judge envelope and kernel text, except NOT_EVALUATED and INFRA_ERROR (no
verdict about the kernel exists). REJECTED and REWARD_HACK are our status extensions and are kept.
A solution is named `<author>_<first 12 hex of the kernel sha256>`, so equal kernels share one file.
Import reads any such folder (also `problems/`): `*.json` under definitions/ and solutions/, `*.jsonl`
under workloads/ and traces/, at any depth; every line is validated and an error names file and line.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from ptxcore.problems import Problem, ProblemNotFoundError, get_problem
from ptxcore.schema import (
    Binding,
    BuildSpec,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Language,
    Solution,
    SourceFile,
    Trace,
    TurnRecord,
    text_sha256,
)

from .store import Warehouse, WarehouseError

_NO_VERDICT = {EvaluationStatus.NOT_EVALUATED, EvaluationStatus.INFRA_ERROR}


class InterchangeError(ValueError):
    """A dataset file is not valid FlashInfer-Trace; the message names file and line."""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unknown"


def solution_of(rec: TurnRecord) -> Solution:
    author = slug(rec.model)
    key = text_sha256(rec.kernel_text or "")
    hardware = rec.gpu or rec.arch
    return Solution(
        name=f"{author}_{key[:12]}", definition=rec.problem, author=rec.model,
        spec=BuildSpec(language=Language.CUDA, target_hardware=[hardware], entry_point="kernel.cu::run",
                       binding=Binding.TVM_FFI),
        sources=[SourceFile(path="kernel.cu", content=rec.kernel_text or "")],
        description=f"campaign {rec.campaign_id}, trajectory {rec.trajectory_id}, turn {rec.turn}",
    )


def trace_of(rec: TurnRecord, problem: Problem, solution: Solution) -> Trace:
    judge = rec.judge
    assert judge is not None
    env = judge.environment
    libs = {k: v for k, v in {"driver": env.driver_version, "cuda": env.cuda_toolkit,
                              "torch": env.torch_version, **env.extra}.items() if v}
    evaluation = Evaluation(
        status=judge.status, environment=Environment(hardware=env.gpu_name or rec.gpu or rec.arch, libs=libs),
        timestamp=rec.created_at or datetime.now(UTC).isoformat(timespec="seconds"),
        log=judge.log or judge.reason, correctness=judge.correctness, performance=judge.performance,
    )
    workload = problem.workload(judge.workload_uuid or None)
    return Trace(definition=rec.problem, workload=workload, solution=solution.name, evaluation=evaluation)


def _write_jsonl(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


def export_campaign_traces(wh: Warehouse, campaign_id: str, out_dir: Path,
                           problems_root: Path | None = None) -> dict[str, int]:
    """Write the campaign's judged turns as a FlashInfer-Trace dataset folder; returns counts."""
    turns = wh.turns(campaign_id)
    if not turns:
        raise WarehouseError(f"campaign {campaign_id!r} has no turns")
    problems, solutions, traces, skipped = _collect(turns, problems_root)
    _write_dataset(Path(out_dir), problems, solutions, traces)
    return {"traces": sum(map(len, traces.values())), "solutions": len(solutions),
            "definitions": len(problems), "skipped_turns": skipped}


def _collect(turns: list[TurnRecord], problems_root: Path | None):
    """(problems by name, solutions by (author, op, definition, name), trace lines by (author, op, definition), skipped)."""
    problems: dict[str, Problem] = {}
    solutions: dict[tuple[str, str, str, str], Solution] = {}
    traces: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    skipped = 0
    for rec in turns:
        if rec.judge is None or rec.kernel_text is None or rec.judge.status in _NO_VERDICT:
            skipped += 1
            continue
        try:
            problem = problems.get(rec.problem) or get_problem(rec.problem, problems_root)
            sol = solution_of(rec)
            trace = trace_of(rec, problem, sol)
        except ProblemNotFoundError:  # problem or workload not in this catalog
            skipped += 1
            continue
        problems[rec.problem] = problem
        where = (slug(rec.model), problem.definition.op_type, rec.problem)
        solutions[(*where, sol.name)] = sol
        traces[where].append(trace.model_dump_json())
    return problems, solutions, traces, skipped


def _write_dataset(out_dir: Path, problems: dict[str, Problem], solutions: dict, traces: dict) -> None:
    for name, problem in problems.items():
        op = problem.definition.op_type
        (out_dir / "definitions" / op).mkdir(parents=True, exist_ok=True)
        (out_dir / "definitions" / op / f"{name}.json").write_text(problem.definition.model_dump_json(indent=1))
        _write_jsonl(out_dir / "workloads" / op / f"{name}.jsonl",
                     [Trace(definition=name, workload=w).model_dump_json() for w in problem.workloads])
    for (author, op, definition, name), sol in solutions.items():
        path = out_dir / "solutions" / author / op / definition / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sol.model_dump_json(indent=1, exclude_none=True))
    for (author, op, definition), lines in traces.items():
        _write_jsonl(out_dir / "traces" / author / op / f"{definition}.jsonl", lines)


def _json_files(root: Path, sub: str, suffix: str) -> list[Path]:
    base = root / sub
    return sorted(p for p in base.rglob(f"*{suffix}") if p.is_file()) if base.is_dir() else []


def _lines(path: Path):
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            yield f"{path}:{i}", line


def _validate(model, text: str, where: str):
    try:
        return model.model_validate_json(text)
    except ValueError as exc:
        first = str(exc).splitlines()[0:3]
        raise InterchangeError(f"{where}: invalid {model.__name__}: {' '.join(first)}") from exc


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
        d = _validate(Definition, path.read_text(), str(path))
        defs.append({"name": d.name, "op_type": d.op_type, "raw_json": d.model_dump_json()})
    for path in _json_files(root, "workloads", ".jsonl"):
        for where, line in _lines(path):
            t = _validate(Trace, line, where)
            wls.append({"definition": t.definition, "uuid": t.workload.uuid,
                        "axes_json": json.dumps(t.workload.axes), "raw_json": t.workload.model_dump_json()})
    for path in _json_files(root, "solutions", ".json"):
        s = _validate(Solution, path.read_text(), str(path))
        sols.append({"name": s.name, "definition": s.definition, "author": s.author,
                     "language": s.spec.language.value, "content_sha256": s.content_sha256(),
                     "raw_json": s.model_dump_json()})
    for path in _json_files(root, "traces", ".jsonl"):
        for where, line in _lines(path):
            trs.append(_trace_row(_validate(Trace, line, where), line))
    for table, rows in (("fi_definitions", defs), ("fi_workloads", wls), ("fi_solutions", sols), ("fi_traces", trs)):
        wh.upsert_rows(table, rows)
    return {"definitions": len(defs), "workloads": len(wls), "solutions": len(sols), "traces": len(trs)}
