"""ARCHITECTURE.md's import rules, checked by import-linter against pyproject.toml's contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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
    """The contracts are live: a copy of the tree with ptxcore.schema importing torch fails."""
    for pkg in ("ptxcore", "tasks", "flows"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    bad = tmp_path / "ptxcore" / "schema" / "base.py"
    bad.write_text("import torch  # noqa\n" + bad.read_text())
    # `python -c` puts the working directory first on sys.path, so the copy shadows the installed tree.
    code = "import sys; sys.argv = ['lint-imports', '--no-cache']; from importlinter.cli import lint_imports_command; lint_imports_command()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "light packages import no heavy library BROKEN" in proc.stdout
