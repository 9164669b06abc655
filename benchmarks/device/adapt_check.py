"""Check SFT Parquet files as a trainer would read them: Hugging Face `datasets` and pyarrow; roles, loss masks,
ids and provenance (every row's source and correct turns, kernels and verdicts looked up in the warehouse).

    python benchmarks/device/adapt_check.py --warehouse runs/x/warehouse.duckdb out/*.parquet

Prints one line per file and one per row; exits 1 on any mismatch. Needs pyarrow, duckdb and datasets only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROLES = {5: ["system", "user", "assistant", "user", "assistant"], 3: ["system", "user", "assistant"]}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _turn(con, campaign: str, trajectory: str, turn: int):
    return con.execute(
        "SELECT t.status, t.target_instruction, t.speedup, t.gpu, t.kernel_sha256, e.raw_json, "
        "ev.family_thread_inst_executed_json FROM turns t LEFT JOIN evaluations e USING (campaign_id, trajectory_id, turn) "
        "LEFT JOIN target_evidence ev USING (campaign_id, trajectory_id, turn) "
        "WHERE t.campaign_id = ? AND t.trajectory_id = ? AND t.turn = ?", [campaign, trajectory, turn]).fetchone()


def check_row(con, row: dict, problems: list[str]) -> str:
    msgs, meta = row["messages"], row["metadata"]
    roles = [m["role"] for m in msgs]
    if roles != ROLES.get(len(msgs)) or [m["step_loss_mask"] for m in msgs] != [0] * (len(msgs) - 1) + [1]:
        problems.append(f"{row['id']}: roles {roles} / masks {[m['step_loss_mask'] for m in msgs]}")
    src = _turn(con, meta["source_campaign_id"], meta["source_trajectory_id"], meta["source_turn"])
    cor = _turn(con, meta["correct_campaign_id"], meta["correct_trajectory_id"], meta["correct_turn"])
    if src is None or cor is None:
        problems.append(f"{row['id']}: a turn it names is not in the warehouse")
        return f"  {row['id']}: MISSING TURN"
    if cor[0] != "PASSED" or cor[1] != "executed" or cor[4] != meta["correct_kernel_sha256"]:
        problems.append(f"{row['id']}: correct turn is {cor[0]} / {cor[1]}")
    if cor[5] is None or _sha(cor[5]) != meta["correct_verdict_sha256"]:
        problems.append(f"{row['id']}: verdict sha256 differs from the warehouse's")
    if meta["final_message_sha256"] != _sha(msgs[-1]["content"]):
        problems.append(f"{row['id']}: final message sha256 differs")
    return (f"  {row['id']}: {len(msgs)} messages, source {meta['source_status']} turn {meta['source_turn']} -> "
            f"{cor[0]} {cor[1]} speedup {cor[2]:.3f} on {cor[3]} (executed counts {cor[6]}), "
            f"{meta['total_tokens']} tokens ({meta['tokenizer']}), reasoning {meta['reasoning_chars']} chars")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("parquet", nargs="+")
    args = parser.parse_args()
    import duckdb
    import pyarrow.parquet as pq
    from datasets import load_dataset

    problems: list[str] = []
    con = duckdb.connect(args.warehouse, read_only=True)
    for path in args.parquet:
        ds = load_dataset("parquet", data_files=path, split="train")
        table = pq.read_table(path).to_pylist()
        same = [r["id"] for r in ds] == [r["id"] for r in table] and len({r["id"] for r in table}) == len(table)
        if not same:
            problems.append(f"{path}: datasets and pyarrow disagree or ids repeat")
        print(f"{Path(path).name}: {ds.num_rows} rows (datasets) / {len(table)} (pyarrow), columns {ds.column_names}")
        for row in table:
            print(check_row(con, row, problems))
    for p in problems:
        print(f"MISMATCH {p}")
    print("OK" if not problems else f"{len(problems)} mismatches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
