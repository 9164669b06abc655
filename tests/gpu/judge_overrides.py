"""JudgeConfig fields a GPU test run sets from outside: PTXBENCH_TEST_JUDGE_CONFIG, a JSON object of fields
(e.g. '{"prepare_tools": true}'), laid over a test module's own configuration. How a device run judges the
hostile suite and the golden controls with a judge option that is not yet the default."""

from __future__ import annotations

import json
import os

import pytest

from ptxcore.gpu import JudgeConfig

ENV = "PTXBENCH_TEST_JUDGE_CONFIG"


def judge_overrides() -> dict:
    """The fields PTXBENCH_TEST_JUDGE_CONFIG names ({} when unset); a usage error for anything else."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{ENV} is not JSON: {exc}") from exc
    unknown = sorted(set(data) - set(JudgeConfig.model_fields)) if isinstance(data, dict) else None
    if unknown is None or unknown or "cache_dir" in data:
        raise pytest.UsageError(f"{ENV} must be a JSON object of JudgeConfig fields other than cache_dir"
                                + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return data
