"""Re-scoring recorded steps with another reward spec, in SQL alone.

`rescore_sql(spec)` is one SELECT over the warehouse that computes, for every environment step, the reward `spec`
would have given it, from the turn's own columns (turns.status, compile_status, target_instruction, speedup and
target_evidence.carries): the same formula as `ptxcore.gym.reward.score`, which tests/gym/test_rescore.py proves
on recorded steps. Paste it into `ptxbench sql`, or wrap it to compare specs.
"""

from __future__ import annotations

from ptxcore.schema import CompileStatus, EvaluationStatus, TargetInstruction, TargetWork

from .reward import BUILT_ONLY, RewardSpec


def _num(x: float) -> str:
    return repr(float(x))  # a validated spec's numbers are finite floats: nothing else reaches the text


def reward_sql_expression(spec: RewardSpec, turns: str = "t", evidence: str = "e") -> str:
    """The reward of one turn under `spec`, as a SQL expression over aliases of `turns` and `target_evidence`."""
    built = ", ".join(f"'{s.value}'" for s in sorted(BUILT_ONLY))
    t, e = turns, evidence
    speed = (f"CASE WHEN {t}.speedup > 0 AND isfinite({t}.speedup) THEN {_num(spec.speedup_per_log2)} * "
             f"least(greatest(log2({t}.speedup), {_num(spec.speedup_log2_min)}), {_num(spec.speedup_log2_max)}) "
             "ELSE 0.0 END")
    passed = (f"{_num(spec.compiled)} + {_num(spec.correct)}"
              f" + CASE WHEN {t}.target_instruction = '{TargetInstruction.EXECUTED.value}' "
              f"THEN {_num(spec.target_executed)} ELSE 0.0 END"
              f" + CASE WHEN {e}.carries = '{TargetWork.CARRIES.value}' THEN {_num(spec.target_carries)} ELSE 0.0 END"
              f" + {speed}")
    return (f"CASE WHEN {t}.status = '{EvaluationStatus.REJECTED.value}' THEN {_num(spec.rejected)}"
            f" WHEN {t}.status = '{EvaluationStatus.REWARD_HACK.value}' THEN {_num(spec.reward_hack)}"
            f" WHEN {t}.compile_status IS DISTINCT FROM '{CompileStatus.COMPILED.value}' THEN 0.0"
            f" WHEN {t}.status = '{EvaluationStatus.PASSED.value}' THEN {passed}"
            f" WHEN {t}.status IN ({built}) THEN {_num(spec.compiled)}"
            " ELSE 0.0 END")


def rescore_sql(spec: RewardSpec) -> str:
    """Every environment step with its recorded reward and the reward (and discounted reward) under `spec`."""
    return f"""SELECT s.campaign_id, s.trajectory_id, s.turn, s.reward AS recorded_reward,
       s.reward_spec_sha256 AS recorded_spec, '{spec.sha256}' AS spec,
       {reward_sql_expression(spec)} AS reward,
       ({reward_sql_expression(spec)}) * pow({_num(spec.gamma)}, s.turn) AS discounted_reward
FROM env_steps s
JOIN turns t USING (campaign_id, trajectory_id, turn)
LEFT JOIN target_evidence e USING (campaign_id, trajectory_id, turn)
ORDER BY s.campaign_id, s.trajectory_id, s.turn"""
