"""Load the problem catalog from a FlashInfer-Trace dataset folder plus our `.ptxbench.yaml` extensions.

Layout (FlashInfer-Trace's):
    <root>/definitions/<op_type>/<name>.json           the definition
    <root>/definitions/<op_type>/<name>.ptxbench.yaml  our extension (beside it)
    <root>/workloads/<op_type>/<name>.jsonl            workload traces
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from ptxcore.schema import Definition, Trace, Workload

from .extension import ProblemExtension


class ProblemNotFoundError(KeyError):
    """No problem of that name in the catalog."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


class CatalogError(ValueError):
    """A catalog file is malformed."""


@dataclass(frozen=True)
class Problem:
    """A definition, its workloads and our extension."""

    definition: Definition
    workloads: tuple[Workload, ...]
    extension: ProblemExtension
    definition_path: Path

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def is_causal(self) -> bool:
        """Causal attention (the definition's `causal:true` tag, or a `_causal` name)."""
        return "causal:true" in self.definition.tags or self.name.endswith("_causal")

    @property
    def primary_workload(self) -> Workload:
        return self.workloads[0]

    def workload(self, uuid: str | None = None) -> Workload:
        if uuid is None:
            return self.primary_workload
        for w in self.workloads:
            if w.uuid == uuid:
                return w
        raise ProblemNotFoundError(f"problem {self.name} has no workload {uuid}")


def default_problems_dir() -> Path:
    """$PTXBENCH_PROBLEMS_DIR, else the repository's problems/ folder."""
    env = os.environ.get("PTXBENCH_PROBLEMS_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "problems"


def _load_workloads(path: Path, name: str) -> tuple[Workload, ...]:
    if not path.is_file():
        raise CatalogError(f"{name}: missing workloads file {path}")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(Trace.model_validate_json(line).workload)
        except ValueError as exc:
            raise CatalogError(f"{path}:{i}: invalid workload trace: {exc}") from exc
    if not out:
        raise CatalogError(f"{path}: no workloads")
    return tuple(out)


def load_problem(definition_path: Path, root: Path) -> Problem:
    """One problem from its definition file."""
    try:
        definition = Definition.model_validate(json.loads(definition_path.read_text()))
    except ValueError as exc:
        raise CatalogError(f"{definition_path}: invalid definition: {exc}") from exc
    ext_path = definition_path.with_name(f"{definition.name}.ptxbench.yaml")
    if not ext_path.is_file():
        raise CatalogError(f"{definition.name}: missing extension file {ext_path.name}")
    try:
        extension = ProblemExtension.model_validate(yaml.safe_load(ext_path.read_text()))
    except ValueError as exc:
        raise CatalogError(f"{ext_path}: invalid extension: {exc}") from exc
    op_dir = definition_path.parent.name
    workloads = _load_workloads(root / "workloads" / op_dir / f"{definition.name}.jsonl", definition.name)
    return Problem(definition, workloads, extension, definition_path)


@lru_cache(maxsize=8)
def _load_catalog(root: Path) -> dict[str, Problem]:
    problems: dict[str, Problem] = {}
    for path in sorted((root / "definitions").glob("*/*.json")):
        problem = load_problem(path, root)
        problems[problem.name] = problem
    if not problems:
        raise CatalogError(f"no problem definitions under {root / 'definitions'}")
    return problems


def load_catalog(root: Path | None = None) -> dict[str, Problem]:
    """All problems, by name."""
    return _load_catalog((root or default_problems_dir()).resolve())


def get_problem(name: str, root: Path | None = None) -> Problem:
    catalog = load_catalog(root)
    if name not in catalog:
        raise ProblemNotFoundError(
            f"unknown problem {name!r} (see `ptxbench problems list`; {len(catalog)} problems)"
        )
    return catalog[name]
