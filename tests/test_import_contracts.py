"""docs/architecture.md's import rules, checked by import-linter against pyproject.toml's contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grimp

REPO = Path(__file__).resolve().parents[1]

EXPECTED = [
    "flows -> tasks -> ptxcore",
    "ptxcore never imports Prefect or MLflow",
    "schema imports nothing of ours",
    "sandbox imports only the schema",
    "light packages import no heavy library",
    "torch and cupy only in ptxcore.gpu",
    "duckdb and pyarrow only in ptxcore.warehouse",
    "litellm only in ptxcore.agent",
    "the judging seam sits above the judge",
    "ptxcore.judge imports no heavy library itself",
    "GPU rooms: service -> pipeline -> harness -> child",
    "the candidate session stays light",
    "ptxcore.triton imports no heavy library and not ptxcore.gpu",
    "Triton child-side modules stay free of pydantic",
    "adapt imports no heavy library directly",
    "the product never imports research",
    "research never imports the tests",
]


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_import_contracts_hold():
    proc = _lint(REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in EXPECTED:
        assert f"{name} KEPT" in proc.stdout


def test_a_violation_is_caught(tmp_path):
    """The contracts are live: a copy of the tree with ptxcore.schema importing torch and ptxcore.metrics
    importing research fails both."""
    for pkg in ("ptxcore", "tasks", "flows", "research"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    bad = tmp_path / "ptxcore" / "schema" / "base.py"
    bad.write_text("import torch  # noqa\n" + bad.read_text())
    fenced = tmp_path / "ptxcore" / "metrics" / "__init__.py"
    fenced.write_text(fenced.read_text() + "\nimport research.kernel_models.hw_model  # noqa\n")
    # `python -c` puts the working directory first on sys.path, so the copy shadows the installed tree.
    code = "import sys; sys.argv = ['lint-imports', '--no-cache']; from importlinter.cli import lint_imports_command; lint_imports_command()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "light packages import no heavy library BROKEN" in proc.stdout
    assert "the product never imports research BROKEN" in proc.stdout


def test_no_import_cycles():
    """No module imports itself back through others (function-level imports included)."""
    import grimp

    graph = grimp.build_graph("ptxcore", "tasks", "flows")
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def _strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                out.append(comp)
    return out
