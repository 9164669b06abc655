"""The docs hold together: every Markdown file a document or a docstring cites exists, every link into a document
lands on a heading, and the README's two commands are the ones CI runs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CITED_MD = re.compile(r"(?<![\w./$-])((?:\.\./|\./)*[\w.-]*(?:/[\w.-]+)*\.md)\b")
"""A path ending in .md (plain, in backticks or in a link target)."""
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")

NOT_IN_THE_REPOSITORY = {
    "fix_kernels/FIXIT_SETTINGS.md": "a file of the PTXBench authors' repository",
    "report.md": "written by `ptxbench report`",
    "response.md": "an MLflow artifact of every turn",
    "headline.md": "an MLflow artifact of every campaign",
    "verdicts.md": "written by solutions/triton's batch into $OUT",
}
"""Markdown names the docs mention that are outputs or other repositories' files, not files of this one."""

COMMAND_1 = ("(command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)) && "
             "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e '.[dev]' "
             "&& ptxbench campaign run campaigns/demo.yaml")
COMMAND_2 = ". .venv/bin/activate && python -m pytest -q -n auto"


def _tracked(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", pattern], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.split()
    return [REPO / p for p in out if (REPO / p).is_file()]


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for n, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((n, line))
    return lines


def _resolves(cited: str, doc: Path) -> bool:
    return (doc.parent / cited).exists() or (REPO / cited).exists()


def test_every_markdown_path_a_document_cites_exists():
    missing = []
    for doc in _tracked("*.md"):
        for n, line in _prose(doc.read_text()):
            for m in CITED_MD.finditer(line):
                cited = m.group(1)
                if cited not in NOT_IN_THE_REPOSITORY and not _resolves(cited, doc):
                    missing.append(f"{doc.relative_to(REPO)}:{n}: {cited}")
    assert not missing, "cited but absent:\n" + "\n".join(missing)


def test_every_docs_path_a_docstring_cites_exists():
    missing = []
    for src in _tracked("*.py"):
        for m in re.finditer(r"\bdocs/[\w.-]+\.md\b", src.read_text()):
            if not (REPO / m.group(0)).is_file():
                missing.append(f"{src.relative_to(REPO)}: {m.group(0)}")
    assert not missing, missing


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_links_into_documents_land_on_a_heading():
    broken = []
    for doc in _tracked("*.md"):
        for n, line in _prose(doc.read_text()):
            for target in LINK.findall(line):
                if target.startswith(("http://", "https://", "mailto:")):
                    continue
                path, _, anchor = target.partition("#")
                if path and not path.endswith(".md") and "/" not in path.rstrip("/"):
                    continue  # an image or file beside a generated report (benchmarks/device/demo_h200/report.md)
                dest = (doc.parent / path).resolve() if path else doc
                if not dest.exists():
                    broken.append(f"{doc.relative_to(REPO)}:{n}: {target} (no such file)")
                elif anchor and dest.suffix == ".md":
                    slugs = {_slug(h.lstrip("#")) for h in dest.read_text().splitlines() if h.startswith("#")}
                    if anchor not in slugs:
                        broken.append(f"{doc.relative_to(REPO)}:{n}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)


def test_nothing_cites_the_design_brief_as_if_it_were_in_the_repository():
    """ARCHITECTURE.md never existed here; docs/architecture.md describes what is built."""
    hits = [f"{p.relative_to(REPO)}" for p in _tracked("*") if p.suffix in {".md", ".py", ".yaml", ".sh", ".toml"}
            and "ARCHITECTURE.md" in p.read_text(errors="replace") and p.name != "test_docs.py"]
    assert not hits, hits


def test_the_readme_gives_the_two_commands_ci_runs():
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    commands = [ln for b in blocks for ln in b.splitlines() if ln and not ln.startswith("#")]
    assert COMMAND_1 in commands and COMMAND_2 in commands
    assert readme.index("bubblewrap") < readme.index(COMMAND_1) and readme.index("nvcc") < readme.index(COMMAND_1)
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    command = COMMAND_2.split("&& ", 1)[1]
    assert any(ln == command or ln.startswith(command + " ||") for ln in ci)  # CI runs command 2 (then the slow set)


@pytest.mark.parametrize("doc", ["docs/architecture.md", "docs/campaigns.md", "docs/cli.md", "docs/analysis.md",
                                 "docs/adapt.md", "docs/gpu-host.md", "docs/problems.md", "docs/environment.md",
                                 "AGENTS.md"])
def test_the_readme_points_at_every_guide(doc):
    assert f"]({doc})" in (REPO / "README.md").read_text()
