"""A judge worker warms its baselines before it reports ready (issue 27, item 4): FlashInfer's JIT rebuild happens
at the service's start, never inside a candidate's judgement or against its deadline."""

from __future__ import annotations

import logging

import pytest

from ptxcore.gpu.service import ServiceConfig
from ptxcore.gpu.service.judge_runner import JudgeRunner
from ptxcore.gpu.service.server import FAKE_RUNNER
from ptxcore.gpu.service.service import ProfilerService
from ptxcore.gpu.service.warm import problems_to_warm, warm
from ptxcore.problems import ProblemNotFoundError, load_catalog


def test_auto_names_the_flashinfer_problems_when_flashinfer_is_installed():
    flashinfer = {p.name for p in load_catalog().values() if p.extension.baseline.library.value == "flashinfer"}
    assert flashinfer, "the catalog has FlashInfer-baseline problems (the GQA ones)"
    assert {p.name for p in problems_to_warm("auto", installed=lambda p: True)} == flashinfer
    assert problems_to_warm("auto", installed=lambda p: False) == []


def test_a_list_names_problems_and_a_bad_name_is_refused():
    assert [p.name for p in problems_to_warm(["gemm_n7168_k5120"])] == ["gemm_n7168_k5120"]
    assert problems_to_warm([]) == []
    with pytest.raises(ProblemNotFoundError):
        problems_to_warm(["no_such_problem"])
    with pytest.raises(ValueError, match="'auto' or a list"):
        problems_to_warm("everything")


def test_a_problem_that_cannot_be_warmed_is_left_to_its_first_judgement(caplog):
    problems = problems_to_warm(["gemm_n7168_k5120", "mha_with_lse_d128"])

    def prepare(problem):
        if problem.name == "gemm_n7168_k5120":
            raise RuntimeError("cuBLAS handle failed")

    with caplog.at_level(logging.INFO):
        took = warm(problems, prepare)
    assert took["gemm_n7168_k5120"] is None and took["mha_with_lse_d128"] >= 0.0
    assert "could not warm gemm_n7168_k5120 (its first judgement will): cuBLAS handle failed" in caplog.text


def test_the_judge_runner_warms_what_it_is_told_and_survives_a_host_without_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PTXBENCH_FORCE_NO_GPU", "1")
    assert JudgeRunner(gpu=0, work_dir=tmp_path, warm=[]).warm_up() == {}
    assert JudgeRunner(gpu=0, work_dir=tmp_path, warm=["gemm_n7168_k5120"]).warm_up() == {"gemm_n7168_k5120": None}


def test_only_judge_workers_get_the_warming_time_on_top_of_their_start(tmp_path):
    judge = ProfilerService(ServiceConfig(work_dir=tmp_path / "a", gpus=[0], warm_timeout_s=600,
                                          worker_start_timeout_s=100))
    fake = ProfilerService(ServiceConfig(work_dir=tmp_path / "b", gpus=[0], runner=FAKE_RUNNER, warm_timeout_s=600,
                                         worker_start_timeout_s=100))
    try:
        assert judge._process_worker(0)._start_timeout_s == 700
        assert fake._process_worker(0)._start_timeout_s == 100
    finally:
        judge.store.close()
        fake.store.close()
