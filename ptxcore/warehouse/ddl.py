"""Table definitions of the warehouse (DuckDB). One statement per table; keys as in docs/architecture.md.

JSON payloads are stored as VARCHAR (no extension needed to read them back); flattened columns beside
them are what SQL queries use.
"""

from __future__ import annotations

from .adapt_ddl import ADAPT_TABLES
from .env_ddl import ENV_TABLES
from .invalidation import INVALIDATIONS_DDL

WAREHOUSE_SCHEMA_VERSION = 3
"""Version of the table layout below (stored in `warehouse_meta`). 2: target_evidence's work columns and
evaluations.arbitration (issue 25), added to older files by ADDED_COLUMNS. 3: the environment's tables env_steps and
env_reward_specs (issue 29), created in older files on open (CREATE TABLE IF NOT EXISTS)."""

TABLES: dict[str, str] = {
    "warehouse_meta": """
        CREATE TABLE IF NOT EXISTS warehouse_meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR
        )""",
    "campaigns": """
        CREATE TABLE IF NOT EXISTS campaigns (
            campaign_id VARCHAR PRIMARY KEY,
            name VARCHAR,
            config_yaml VARCHAR,
            config_sha256 VARCHAR,
            created_at VARCHAR,
            ptxbench_version VARCHAR,
            git_commit VARCHAR,
            schema_version INTEGER
        )""",
    "trajectories": """
        CREATE TABLE IF NOT EXISTS trajectories (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            model VARCHAR,
            arch VARCHAR,
            prompt_variant VARCHAR,
            problem VARCHAR,
            language VARCHAR,
            "index" INTEGER,
            max_turns INTEGER,
            num_turns INTEGER,
            stop_reason VARCHAR,
            best_speedup DOUBLE,
            started_at VARCHAR,
            finished_at VARCHAR,
            schema_version INTEGER,
            PRIMARY KEY (campaign_id, trajectory_id)
        )""",
    "turns": """
        CREATE TABLE IF NOT EXISTS turns (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            turn INTEGER NOT NULL,
            model VARCHAR,
            arch VARCHAR,
            gpu VARCHAR,
            prompt_variant VARCHAR,
            problem VARCHAR,
            prompt_sha256 VARCHAR,
            kernel_sha256 VARCHAR,
            kernel_key VARCHAR,
            response_text VARCHAR,
            reasoning_text VARCHAR,
            prompt_tokens BIGINT,
            completion_tokens BIGINT,
            reasoning_tokens BIGINT,
            cached_tokens BIGINT,
            llm_latency_s DOUBLE,
            cost_usd DOUBLE,
            status VARCHAR,
            target_instruction VARCHAR,
            speedup DOUBLE,
            feedback VARCHAR,
            compile_status VARCHAR,
            compile_json VARCHAR,
            environment_sha256 VARCHAR,
            created_at VARCHAR,
            schema_version INTEGER,
            PRIMARY KEY (campaign_id, trajectory_id, turn)
        )""",
    "kernels": """
        CREATE TABLE IF NOT EXISTS kernels (
            sha256 VARCHAR PRIMARY KEY,
            text VARCHAR,
            n_bytes BIGINT
        )""",
    "evaluations": """
        CREATE TABLE IF NOT EXISTS evaluations (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            turn INTEGER NOT NULL,
            status VARCHAR,
            reason VARCHAR,
            definition VARCHAR,
            workload_uuid VARCHAR,
            arch VARCHAR,
            max_absolute_error DOUBLE,
            max_relative_error DOUBLE,
            correctness_extra_json VARCHAR,
            latency_ms DOUBLE,
            reference_latency_ms DOUBLE,
            speedup DOUBLE,
            sanitizer_ran INTEGER,
            sanitizer_errors INTEGER,
            compile_status VARCHAR,
            max_registers INTEGER,
            total_spill_bytes BIGINT,
            max_shared_bytes BIGINT,
            target_instruction VARCHAR,
            stage_seconds_json VARCHAR,
            total_stage_s DOUBLE,
            environment_sha256 VARCHAR,
            raw_json VARCHAR,
            arbitration VARCHAR,
            PRIMARY KEY (campaign_id, trajectory_id, turn)
        )""",
    "target_evidence": """
        CREATE TABLE IF NOT EXISTS target_evidence (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            turn INTEGER NOT NULL,
            status VARCHAR,
            static VARCHAR,
            family_thread_inst_executed_json VARCHAR,
            raw_rows_json VARCHAR,
            n_raw_rows INTEGER,
            tool VARCHAR,
            reason VARCHAR,
            source_sha256 VARCHAR,
            cubin_sha256 VARCHAR,
            carries VARCHAR,
            work_share DOUBLE,
            target_flops BIGINT,
            target_flops_bound BIGINT,
            problem_flops BIGINT,
            tma_instructions BIGINT,
            work_reason VARCHAR,
            PRIMARY KEY (campaign_id, trajectory_id, turn)
        )""",
    "reference_latencies": """
        CREATE TABLE IF NOT EXISTS reference_latencies (
            definition VARCHAR NOT NULL,
            workload_uuid VARCHAR NOT NULL,
            gpu VARCHAR NOT NULL,
            driver VARCHAR NOT NULL,
            latency_ms DOUBLE,
            measured_at VARCHAR,
            PRIMARY KEY (definition, workload_uuid, gpu, driver)
        )""",
    "environments": """
        CREATE TABLE IF NOT EXISTS environments (
            sha256 VARCHAR PRIMARY KEY,
            gpu_name VARCHAR,
            driver_version VARCHAR,
            cuda_toolkit VARCHAR,
            torch_version VARCHAR,
            raw_json VARCHAR
        )""",
    "ptxbench_source_turns": """
        CREATE TABLE IF NOT EXISTS ptxbench_source_turns (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            turn INTEGER NOT NULL,
            exp_dir VARCHAR,
            workload_uuid VARCHAR,
            workload_name VARCHAR,
            required_arch_tag VARCHAR,
            correctness VARCHAR,
            speedup DOUBLE,
            arch_tag VARCHAR,
            correct_with_arch INTEGER,
            reasoning_token_source VARCHAR,
            performance_score DOUBLE,
            PRIMARY KEY (campaign_id, trajectory_id, turn)
        )""",
    "turn_augmentations": """
        CREATE TABLE IF NOT EXISTS turn_augmentations (
            campaign_id VARCHAR NOT NULL,
            trajectory_id VARCHAR NOT NULL,
            turn INTEGER NOT NULL,
            condition VARCHAR,
            status VARCHAR,
            source VARCHAR,
            source_sha256 VARCHAR,
            n_groups INTEGER,
            n_notes INTEGER,
            n_fixed_kernels INTEGER,
            appended_chars BIGINT,
            items_json VARCHAR,
            raw_json VARCHAR,
            PRIMARY KEY (campaign_id, trajectory_id, turn)
        )""",
    "repair_notes": """
        CREATE TABLE IF NOT EXISTS repair_notes (
            collection_id VARCHAR NOT NULL,
            pair_id VARCHAR NOT NULL,
            problem VARCHAR,
            arch VARCHAR,
            prompt_variant VARCHAR,
            wrong_sha256 VARCHAR,
            fixed_sha256 VARCHAR,
            fixed_speedup DOUBLE,
            n_notes INTEGER,
            teacher_model VARCHAR,
            record_sha256 VARCHAR,
            raw_json VARCHAR,
            PRIMARY KEY (collection_id, pair_id)
        )""",
    "fi_definitions": """
        CREATE TABLE IF NOT EXISTS fi_definitions (
            name VARCHAR PRIMARY KEY,
            op_type VARCHAR,
            raw_json VARCHAR
        )""",
    "fi_workloads": """
        CREATE TABLE IF NOT EXISTS fi_workloads (
            definition VARCHAR NOT NULL,
            uuid VARCHAR NOT NULL,
            axes_json VARCHAR,
            raw_json VARCHAR,
            PRIMARY KEY (definition, uuid)
        )""",
    "fi_solutions": """
        CREATE TABLE IF NOT EXISTS fi_solutions (
            name VARCHAR PRIMARY KEY,
            definition VARCHAR,
            author VARCHAR,
            language VARCHAR,
            content_sha256 VARCHAR,
            raw_json VARCHAR
        )""",
    "fi_traces": """
        CREATE TABLE IF NOT EXISTS fi_traces (
            trace_sha256 VARCHAR PRIMARY KEY,
            definition VARCHAR,
            workload_uuid VARCHAR,
            solution VARCHAR,
            status VARCHAR,
            hardware VARCHAR,
            latency_ms DOUBLE,
            reference_latency_ms DOUBLE,
            speedup_factor DOUBLE,
            timestamp VARCHAR,
            raw_json VARCHAR
        )""",
    "invalidations": INVALIDATIONS_DDL,
    **ADAPT_TABLES,
    **ENV_TABLES,
}
"""Every table, by name, in creation order."""

ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("target_evidence", "carries", "VARCHAR"), ("target_evidence", "work_share", "DOUBLE"),
    ("target_evidence", "target_flops", "BIGINT"), ("target_evidence", "target_flops_bound", "BIGINT"),
    ("target_evidence", "problem_flops", "BIGINT"), ("target_evidence", "tma_instructions", "BIGINT"),
    ("target_evidence", "work_reason", "VARCHAR"), ("evaluations", "arbitration", "VARCHAR"),
)
"""(table, column, type) added after a table's first layout: a file written before gets them on open (NULL in old
rows: target_work reads unknown there)."""

TURN_KEY = ("campaign_id", "trajectory_id", "turn")
"""Key of every per-turn table."""
