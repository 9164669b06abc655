"""PTXBENCH_TEST_JUDGE_CONFIG: how a device run judges the GPU suites with an option that is not the default."""

from __future__ import annotations

import pytest

from tests.gpu.judge_overrides import ENV, judge_overrides


def test_unset_changes_nothing_and_fields_are_laid_over(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert judge_overrides() == {}
    monkeypatch.setenv(ENV, '{"prepare_tools": true, "trials": 2}')
    assert judge_overrides() == {"prepare_tools": True, "trials": 2}


@pytest.mark.parametrize("text, why", [
    ("{not json", "is not JSON"),
    ("[1]", "must be a JSON object"),
    ('{"prepare_tool": true}', "unknown: prepare_tool"),
    ('{"cache_dir": "/tmp/x"}', "other than cache_dir"),
])
def test_anything_else_is_a_usage_error(monkeypatch, text, why):
    monkeypatch.setenv(ENV, text)
    with pytest.raises(pytest.UsageError, match=why):
        judge_overrides()
