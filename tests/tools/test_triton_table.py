"""tools/triton_table.py: rows -> README table; bad input is one line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "triton_table.py"

ROWS = [
    {"check": "solution", "problem": "gemm_n7168_k5120", "kernel": "tma_persistent.py",
     "errors": {"C": {"mismatches": 0, "max_abs": 0.5}}, "latency_ms": 0.95, "baseline_ms": 0.8, "speedup": 0.842,
     "families": {"gmma": 4, "tma": 10}},
    {"check": "ncu", "problem": "gemm_n7168_k5120", "kernel": "tma_persistent.py", "status": "executed",
     "counts": {"gmma": 146800640, "tma": 286720}},
]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_table_into_readme_block(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:begin -->\nold\n<!-- results:end -->\ntail\n")
    r = _run(str(rows), "--readme", str(readme))
    assert r.returncode == 0, r.stderr
    text = readme.read_text()
    assert "old" not in text and text.startswith("intro\n") and text.endswith("tail\n")
    assert "| gemm_n7168_k5120 | `tma_persistent.py` | not wired | 0 | 0.9500 | 0.8000 | 0.842 | gmma 4, tma 10 " \
           "| executed (gmma 146,800,640, tma 286,720) |" in text


def test_bad_rows_are_one_line(tmp_path):
    bad = tmp_path / "rows.jsonl"
    bad.write_text("{not json\n")
    r = _run(str(bad))
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "rows.jsonl:1" in r.stderr
    missing = _run(str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "no such rows file" in missing.stderr
