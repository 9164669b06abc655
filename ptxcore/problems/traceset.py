"""Judged kernels as a FlashInfer-Trace dataset folder, and back (pure: no warehouse, no GPU).

Written layout (FlashInfer-Trace's, plus one file of ours that its loaders never read):
    definitions/<op_type>/<definition>.json
    workloads/<op_type>/<definition>.jsonl                 workload traces (no solution, no evaluation)
    solutions/<author>/<op_type>/<definition>/<name>.json  one per distinct kernel text
    traces/<author>/<op_type>/<definition>.jsonl           one trace per verdict
    ptxbench/target_evidence.jsonl                         per trace (by line sha256): architecture and
                                                           target-instruction evidence, which FlashInfer-Trace
                                                           has no field for

A solution is named `<author>_<first 12 hex of the kernel sha256>`, so equal kernels share one file.
Used by `ptxbench warehouse export-traces` and by the recorded-verdict judge backend.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ptxcore.schema import (
    Binding,
    BuildSpec,
    Environment,
    EnvironmentInfo,
    Evaluation,
    JudgeResult,
    Language,
    Solution,
    SourceFile,
    TargetInstructionEvidence,
    Trace,
    text_sha256,
)
from ptxcore.schema.files import read_text, regular_files, write_tree

from .catalog import Problem

EVIDENCE_FILE = Path("ptxbench") / "target_evidence.jsonl"
M = TypeVar("M", bound=BaseModel)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unknown"


@dataclass(frozen=True)
class JudgedKernel:
    """One verdict about one kernel text, with who wrote it and when it was judged."""

    author: str
    kernel_text: str
    judge: JudgeResult
    created_at: str = ""
    description: str = ""
    hardware: str | None = None
    """GPU the verdict was reached on (falls back to the judge's environment, then the architecture)."""


def solution_of(k: JudgedKernel) -> Solution:
    author = slug(k.author)
    return Solution(
        name=f"{author}_{text_sha256(k.kernel_text)[:12]}", definition=k.judge.definition, author=k.author,
        spec=BuildSpec(language=Language.CUDA, target_hardware=[k.hardware or k.judge.arch], entry_point="kernel.cu::run",
                       binding=Binding.TVM_FFI),
        sources=[SourceFile(path="kernel.cu", content=k.kernel_text)], description=k.description,
    )


def trace_libs(env: EnvironmentInfo) -> dict[str, str]:
    """FlashInfer-Trace's `libs`: versions, then the protocol facts as strings (the v1 layout, unchanged)."""
    facts = {"env_stream_ids": ",".join(map(str, env.env_stream_ids)),
             "trial_medians_ms": ",".join(f"{m:.5f}" for m in env.trial_medians_ms),
             "persisting_l2_resets": "" if env.persisting_l2_resets is None else str(env.persisting_l2_resets)}
    libs = {"driver": env.driver_version, "cuda": env.cuda_toolkit, "torch": env.torch_version,
            **env.library_versions, **facts}
    return {k: v for k, v in libs.items() if v}


def trace_of(k: JudgedKernel, problem: Problem, solution: Solution) -> Trace:
    judge, env = k.judge, k.judge.environment
    evaluation = Evaluation(
        status=judge.status,
        environment=Environment(hardware=env.gpu_name or k.hardware or judge.arch, libs=trace_libs(env)),
        timestamp=k.created_at or datetime.now(UTC).isoformat(timespec="seconds"), log=judge.log or judge.reason,
        correctness=judge.correctness.to_trace() if judge.correctness is not None else None,
        performance=judge.performance,
    )
    return Trace(definition=judge.definition, workload=problem.workload(judge.workload_uuid),
                 solution=solution.name, evaluation=evaluation)


class TraceSetWriter:
    """Collects judged kernels, then writes the dataset folder."""

    def __init__(self) -> None:
        self.problems: dict[str, Problem] = {}
        self.solutions: dict[tuple[str, str, str, str], Solution] = {}
        self.traces: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.evidence: list[str] = []

    def add(self, k: JudgedKernel, problem: Problem) -> None:
        sol = solution_of(k)
        line = trace_of(k, problem, sol).model_dump_json()
        self.problems[problem.name] = problem
        where = (slug(k.author), problem.definition.op_type, problem.name)
        self.solutions[(*where, sol.name)] = sol
        self.traces[where].append(line)
        self.evidence.append(json.dumps({"trace_sha256": text_sha256(line), "arch": k.judge.arch,
                                         "target_instruction": k.judge.target_instruction.model_dump(mode="json")}))

    @property
    def count(self) -> int:
        return sum(map(len, self.traces.values()))

    def files(self) -> dict[str, bytes]:
        """The dataset folder's files: relative path -> content."""
        out: dict[str, bytes] = {}
        for name, problem in self.problems.items():
            op = problem.definition.op_type
            out[f"definitions/{op}/{name}.json"] = problem.definition.model_dump_json(indent=1).encode()
            out[f"workloads/{op}/{name}.jsonl"] = _jsonl(
                [Trace(definition=name, workload=w).model_dump_json() for w in problem.workloads])
        for (author, op, definition, name), sol in self.solutions.items():
            out[f"solutions/{author}/{op}/{definition}/{name}.json"] = sol.model_dump_json(
                indent=1, exclude_none=True).encode()
        for (author, op, definition), lines in self.traces.items():
            out[f"traces/{author}/{op}/{definition}.jsonl"] = _jsonl(lines)
        out[EVIDENCE_FILE.as_posix()] = _jsonl(self.evidence)
        return out

    def write(self, out_dir: Path) -> None:
        """Write the folder without following links below `out_dir` (InputFileError naming a planted link)."""
        write_tree(Path(out_dir), self.files())


def _jsonl(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


@dataclass(frozen=True)
class TracedVerdict:
    """A verdict read back from a dataset folder."""

    kernel_sha256: str
    trace: Trace
    trace_sha256: str
    arch: str | None
    target_instruction: TargetInstructionEvidence | None
    where: str
    """file:line of the trace."""


def read_traced_verdicts(root: Path) -> list[TracedVerdict]:
    """Every trace with an evaluation whose solution file is in the folder, joined with our evidence file.
    Malformed files raise ValueError naming file and line."""
    root = Path(root)
    kernels = {}
    for path in _files(root / "solutions", ".json"):
        sol = _validated(Solution, _read(path), str(path))
        kernels[sol.name] = text_sha256(sol.sources[0].content) if len(sol.sources) == 1 else None
    evidence = {}
    ev_path = root / EVIDENCE_FILE
    if ev_path.parent.is_symlink():
        raise ValueError(f"{ev_path.parent}: is a symbolic link (refused: a dataset folder is read without following links)")
    present = ev_path.exists() or ev_path.is_symlink()
    for i, line in enumerate(_read(ev_path).splitlines() if present else [], start=1):
        try:
            row = json.loads(line)
            evidence[row["trace_sha256"]] = (row["arch"], TargetInstructionEvidence.model_validate(row["target_instruction"]))
        except ValidationError as exc:
            raise ValueError(f"{ev_path}:{i}: invalid target-evidence row: {validation_summary(exc)}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{ev_path}:{i}: invalid target-evidence row ({type(exc).__name__})") from None
    out = []
    for path in _files(root / "traces", ".jsonl"):
        for i, line in enumerate(_read(path).splitlines(), start=1):
            if not line.strip():
                continue
            tr = _validated(Trace, line, f"{path}:{i}")
            sha = kernels.get(tr.solution or "")
            if tr.evaluation is None or sha is None:
                continue
            arch, ev = evidence.get(text_sha256(line), (None, None))
            out.append(TracedVerdict(sha, tr, text_sha256(line), arch, ev, f"{path}:{i}"))
    return out


MAX_FILE_BYTES = 256 << 20
"""Largest file of a dataset folder read back."""


def _files(base: Path, suffix: str) -> list[Path]:
    """Regular files below `base` (a symbolic link anywhere is refused: ValueError naming it, not its target)."""
    if base.is_symlink():
        raise ValueError(f"{base}: is a symbolic link (refused: a dataset folder is read without following links)")
    return regular_files(base, suffix) if base.is_dir() else []


def _read(path: Path) -> str:
    return read_text(path, MAX_FILE_BYTES, follow_symlinks=False)


def validation_summary(exc: ValidationError, limit: int = 3) -> str:
    """The first errors of a validation as `loc: message`, never the offending input (it may be a host file)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in errors[:limit]]
    more = f" (and {len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


def _validated(model: type[M], text: str, where: str) -> M:
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"{where}: invalid {model.__name__}: {validation_summary(exc)}") from None
    except ValueError as exc:
        raise ValueError(f"{where}: invalid {model.__name__}: {str(exc).splitlines()[0][:200]}") from None
