"""The service builds queued CUDA candidates ahead of their GPU (issue 27) into the compile cache its judge
workers read; a prebuild decides nothing (the worker's lookup verifies the entry as any cache hit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache
from ptxcore.compile.stage import lookup_key
from ptxcore.compile.toolchain import toolchain
from ptxcore.gpu.service import ServiceConfig
from ptxcore.gpu.service.prebuild import JUDGE_RUNNER, Prebuilder, prebuilder_for
from ptxcore.gpu.service.server import FAKE_RUNNER

REPO = Path(__file__).resolve().parents[3]


def test_only_the_judge_runner_with_workers_gets_a_prebuilder(tmp_path):
    args = {"judge_config": {"cache_dir": str(tmp_path)}}
    assert prebuilder_for(FAKE_RUNNER, args, 2) is None
    assert prebuilder_for(JUDGE_RUNNER, args, 0) is None
    pre = prebuilder_for(JUDGE_RUNNER, args, 2)
    assert pre is not None and pre.cache.root == tmp_path / "compile"
    pre.stop()
    assert pre.submit("int x;", "hopper") is None  # stopped: nothing more is queued
    with pytest.raises(ValueError, match="judge_config"):
        prebuilder_for(JUDGE_RUNNER, {"judge_config": "not an object"}, 2)
    with pytest.raises(ValueError):
        ServiceConfig(work_dir=tmp_path, gpus=[0], prebuild_workers=-1)


def test_a_prebuilt_candidate_is_a_cache_hit_for_the_worker(tmp_path):
    source = (REPO / "tests" / "fixtures" / "kernels" / "syntax_error.cu").read_text()
    pre = Prebuilder(tmp_path, workers=1, build_timeout_s=120)
    pre.submit(source, "hopper").result(timeout=300)
    pre.stop()
    options = BuildOptions(get_architecture("hopper"), timeout_s=120)
    hit = CompileCache(tmp_path / "compile").lookup(lookup_key(source, options, toolchain("hopper")))
    assert hit is not None and hit.result.status.value == "COMPILE_ERROR"


def test_a_failing_prebuild_is_logged_and_leaves_the_build_to_the_worker(tmp_path, monkeypatch, caplog):
    import ptxcore.gpu.service.prebuild as prebuild

    def broken(*args, **kwargs):
        raise RuntimeError("no sandbox on this host")

    monkeypatch.setattr(prebuild, "compile_candidate", broken)
    pre = Prebuilder(tmp_path, workers=1, build_timeout_s=120)
    pre.submit("__global__ void k() {}", "hopper").result(timeout=30)  # no exception escapes the thread
    pre.stop()
    assert "prebuild failed (the worker builds it): no sandbox on this host" in caplog.text
