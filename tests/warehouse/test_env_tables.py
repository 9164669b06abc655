"""The environment's tables (layout 3): a warehouse written before them reads with this version's views, gains them
when opened for writing, and v_env_returns sums gamma^turn * reward per episode, leaving invalidated turns out."""

from __future__ import annotations

import duckdb
import pytest

from ptxcore.warehouse import Warehouse
from ptxcore.warehouse.ddl import TABLES
from ptxcore.warehouse.env_ddl import ENV_TABLES
from ptxcore.warehouse.invalidation import InvalidationTarget
from tests.warehouse.test_work_views import _turn


def _old_file(path):
    con = duckdb.connect(str(path))
    for name, ddl in TABLES.items():
        if name not in ENV_TABLES:
            con.execute(ddl)
    con.close()


def test_a_file_without_the_environment_tables_reads_and_then_gains_them(tmp_path):
    path = tmp_path / "old.duckdb"
    _old_file(path)
    with Warehouse(path, read_only=True) as wh:
        assert wh.sql("SELECT count(*) FROM v_turn_outcomes")[1] == [(0,)]  # this version's views still apply
        assert not wh.has_table("env_steps")
    with Warehouse(path) as wh:
        assert wh.has_table("env_steps") and wh.has_table("env_reward_specs")
        assert wh.sql("SELECT count(*) FROM v_env_returns")[1] == [(0,)]


def _step(trajectory: str, turn: int, reward: float, gamma: float = 0.5) -> dict:
    return {"campaign_id": "c1", "trajectory_id": trajectory, "turn": turn, "source": "environment",
            "policy_model": "p", "seed": 0, "reward_spec_sha256": "a" * 64, "reward": reward, "reward_basis": "measured",
            "reward_compiled": reward, "reward_correct": 0.0, "reward_target": 0.0, "reward_speedup": 0.0,
            "reward_penalty": 0.0, "gamma": gamma, "terminated": False, "truncated": turn == 1, "step_s": 0.1,
            "created_at": "2026-12-02T00:00:00+00:00"}


def test_returns_view_discounts_and_leaves_invalid_turns_out(tmp_path):
    from ptxcore.schema import TargetWork

    with Warehouse(tmp_path / "w.duckdb") as wh:
        turns = [_turn("A", 0, TargetWork.UNKNOWN, None), _turn("A", 1, TargetWork.CARRIES, 1.3)]
        wh.upsert_turns(turns)
        tid = turns[0].trajectory_id
        wh.upsert_rows("env_steps", [_step(tid, 0, 0.1), _step(tid, 1, 1.0)])
        _, rows = wh.sql("SELECT steps, total_reward, discounted_return, truncated FROM v_env_returns")
        assert rows == [(2, pytest.approx(1.1), pytest.approx(0.1 + 0.5), True)]
        wh.invalidate([InvalidationTarget.parse_turn(f"c1/{tid}/1")], reason="test", actor="t")
        _, rows = wh.sql("SELECT steps, discounted_return FROM v_env_returns")
        assert rows == [(1, pytest.approx(0.1))]
