"""Tables of the training environment (ptxcore.gym): the reward row beside each turn, the reward specs.

An environment step is an ordinary turn (turns, evaluations, target_evidence, kernels) of a trajectory of a
campaign; `env_steps` (same key as `turns`) adds its reward, the sha256 of the spec that scored it, the discount,
the episode's seed and the step's wall time; `env_reward_specs` holds each spec's canonical JSON by sha256. A new
spec re-scores old steps by SQL over `turns`, `target_evidence` and `env_steps` (docs/environment.md).
"""

from __future__ import annotations

ENV_TABLES: dict[str, str] = {
    "env_steps": """
        CREATE TABLE IF NOT EXISTS env_steps (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            turn INTEGER NOT NULL,
            source VARCHAR,
            policy_model VARCHAR,
            seed BIGINT,
            reward_spec_sha256 VARCHAR,
            reward DOUBLE,
            reward_basis VARCHAR,
            reward_compiled DOUBLE,
            reward_correct DOUBLE,
            reward_target DOUBLE,
            reward_speedup DOUBLE,
            reward_penalty DOUBLE,
            gamma DOUBLE,
            terminated BOOLEAN,
            truncated BOOLEAN,
            step_s DOUBLE,
            created_at VARCHAR,
            PRIMARY KEY (campaign_id, trajectory_id, turn)
        )""",
    "env_reward_specs": """
        CREATE TABLE IF NOT EXISTS env_reward_specs (
            sha256 VARCHAR PRIMARY KEY,
            name VARCHAR,
            spec_json VARCHAR
        )""",
}
"""Every table of the environment, by name."""

ENV_KEYS: dict[str, tuple[str, ...]] = {
    "env_steps": ("campaign_id", "trajectory_id", "turn"),
    "env_reward_specs": ("sha256",),
}
"""Primary keys (what an upsert replaces by)."""

V_ENV_RETURNS = """
CREATE OR REPLACE VIEW v_env_returns AS
SELECT s.campaign_id, s.trajectory_id, any_value(s.policy_model) AS policy_model,
       any_value(s.reward_spec_sha256) AS reward_spec_sha256, count(DISTINCT s.reward_spec_sha256) AS n_specs,
       any_value(s.seed) AS seed, count(*) AS steps, sum(s.reward) AS total_reward,
       sum(s.reward * pow(s.gamma, s.turn)) AS discounted_return, max(t.speedup) AS best_speedup,
       bool_or(s.terminated) AS terminated, bool_or(s.truncated) AS truncated
FROM env_steps s
JOIN turns t USING (campaign_id, trajectory_id, turn)
LEFT JOIN v_invalid_turns i USING (campaign_id, trajectory_id, turn)
WHERE i.turn IS NULL
GROUP BY s.campaign_id, s.trajectory_id
"""
"""Per episode: steps, total and discounted return (sum of gamma^turn * reward), best speedup, how it ended;
invalidated turns left out. `n_specs` > 1 says the episode's steps were scored by different specs."""
