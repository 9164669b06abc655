"""Tables of the adaptation data engine (ptxcore.adapt): one per stage, keyed so reruns replace, never add.

Lineage: adapt_rows.pair_id -> adapt_pairs (source_* = the wrong turn, correct_* = the repair turn, each
with kernel sha256 -> kernels and verdict sha256 of the judge envelope in evaluations) -> adapt_selections
(item_id) and adapt_repairs (the repair campaign's trajectory in trajectories/turns); adapt_reasoning
holds every synthesizer call (prompt by sha256 in adapt_texts); adapt_exports every Parquet written.
"""

from __future__ import annotations

_REF = """
            {p}_campaign_id VARCHAR, {p}_trajectory_id VARCHAR, {p}_turn INTEGER, {p}_model VARCHAR,
            {p}_kernel_sha256 VARCHAR, {p}_verdict_sha256 VARCHAR, {p}_status VARCHAR, {p}_gpu VARCHAR,"""

ADAPT_TABLES: dict[str, str] = {
    "adapt_builds": """
        CREATE TABLE IF NOT EXISTS adapt_builds (
            build_id VARCHAR PRIMARY KEY, recipe_name VARCHAR, template VARCHAR, config_label VARCHAR,
            recipe_yaml VARCHAR, recipe_sha256 VARCHAR, selection_json VARCHAR, created_at VARCHAR,
            updated_at VARCHAR
        )""",
    "adapt_selections": f"""
        CREATE TABLE IF NOT EXISTS adapt_selections (
            build_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL,{_REF.format(p="source")}
            arch VARCHAR, prompt_variant VARCHAR, problem VARCHAR, prompt_sha256 VARCHAR, stratum VARCHAR,
            outcome VARCHAR, rank INTEGER,
            PRIMARY KEY (build_id, item_id)
        )""",
    "adapt_repairs": """
        CREATE TABLE IF NOT EXISTS adapt_repairs (
            build_id VARCHAR NOT NULL, item_id VARCHAR NOT NULL, repair_campaign_id VARCHAR,
            repair_trajectory_id VARCHAR, prompt_sha256 VARCHAR, stop_reason VARCHAR, num_turns INTEGER,
            PRIMARY KEY (build_id, item_id)
        )""",
    "adapt_pairs": f"""
        CREATE TABLE IF NOT EXISTS adapt_pairs (
            build_id VARCHAR NOT NULL, pair_id VARCHAR NOT NULL, template VARCHAR, item_id VARCHAR,
            problem VARCHAR, arch VARCHAR, prompt_variant VARCHAR, error_type VARCHAR,{_REF.format(p="source")}
            {_REF.format(p="correct")}
            speedup DOUBLE, target_instruction VARCHAR, status VARCHAR,
            PRIMARY KEY (build_id, pair_id)
        )""",
    "adapt_reasoning": """
        CREATE TABLE IF NOT EXISTS adapt_reasoning (
            build_id VARCHAR NOT NULL, pair_id VARCHAR NOT NULL, attempt INTEGER NOT NULL, kind VARCHAR,
            model VARCHAR, prompt_sha256 VARCHAR, response_text VARCHAR, reasoning VARCHAR, status VARCHAR,
            detail VARCHAR, prompt_tokens BIGINT, completion_tokens BIGINT, latency_s DOUBLE, cost_usd DOUBLE,
            target_max_chars BIGINT, created_at VARCHAR,
            PRIMARY KEY (build_id, pair_id, attempt)
        )""",
    "adapt_rows": """
        CREATE TABLE IF NOT EXISTS adapt_rows (
            build_id VARCHAR NOT NULL, row_id VARCHAR NOT NULL, pair_id VARCHAR, template VARCHAR,
            reasoning_attempt INTEGER, status VARCHAR, total_tokens BIGINT, tokenizer VARCHAR,
            messages_json VARCHAR, metadata_json VARCHAR,
            PRIMARY KEY (build_id, row_id)
        )""",
    "adapt_exports": """
        CREATE TABLE IF NOT EXISTS adapt_exports (
            build_id VARCHAR NOT NULL, parquet_sha256 VARCHAR NOT NULL, path VARCHAR, manifest_sha256 VARCHAR,
            stats_sha256 VARCHAR, training_sha256 VARCHAR, rows BIGINT, dropped BIGINT, tokenizer VARCHAR,
            created_at VARCHAR,
            PRIMARY KEY (build_id, parquet_sha256)
        )""",
    "adapt_texts": """
        CREATE TABLE IF NOT EXISTS adapt_texts (
            sha256 VARCHAR PRIMARY KEY, text VARCHAR
        )""",
}
"""The adapt tables, in creation order."""

ADAPT_KEYS: dict[str, tuple[str, ...]] = {
    "adapt_builds": ("build_id",), "adapt_selections": ("build_id", "item_id"),
    "adapt_repairs": ("build_id", "item_id"), "adapt_pairs": ("build_id", "pair_id"),
    "adapt_reasoning": ("build_id", "pair_id", "attempt"), "adapt_rows": ("build_id", "row_id"),
    "adapt_exports": ("build_id", "parquet_sha256"), "adapt_texts": ("sha256",),
}
"""Primary key of every adapt table."""
