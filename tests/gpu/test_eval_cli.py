"""`ptxbench eval` and the engine without a GPU: CPU stages, plain 'no GPU' exit; static verdicts of controls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.gpu import JudgeConfig, NoGPUError, judge_candidate
from ptxcore.judge import cpu_stages
from ptxcore.problems import get_problem
from ptxcore.schema import EvaluationStatus, StaticTarget

CONTROLS = Path(__file__).resolve().parents[1] / "fixtures" / "controls"
HOPPER = get_architecture("hopper")


def _eval(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PTXBENCH_FORCE_NO_GPU": "1", "PTXBENCH_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", "from flows.cli.main import app; app()", "eval", *args], capture_output=True, text=True,
                          env=env, timeout=600, cwd=Path(__file__).resolve().parents[2])


def test_cublas_include_is_rejected_without_a_gpu(compile_cache_dir):
    r = _eval([str(CONTROLS / "12_cublas_include.cu"), "--problem", "gemm_n7168_k5120", "--json"], compile_cache_dir)
    assert r.returncode == 1, r.stderr
    env = json.loads(r.stdout)
    assert env["status"] == "REJECTED" and "cuBLAS" in env["reason"]


def test_no_gpu_runs_cpu_stages_and_says_so(compile_cache_dir):
    r = _eval([str(CONTROLS / "02_gemm_tma.cu"), "--problem", "gemm_n7168_k5120", "--json"], compile_cache_dir)
    assert r.returncode == 3
    env = json.loads(r.stdout)
    assert env["status"] == "NOT_EVALUATED" and env["compile"]["status"] == "COMPILED"
    assert env["sass"]["target_static"] == "present"
    assert "no GPU is available" in r.stderr and "Traceback" not in r.stderr


def test_piped_eval_output_never_cuts_a_path_or_a_name(compile_cache_dir, tmp_path):
    """Piped (as in `ptxbench eval ... | cat`), the summary and the "no GPU" message were folded at 80 columns."""
    deep = tmp_path / ("a_folder_with_a_name_long_enough_to_push_the_path_past_eighty_columns" * 2)
    deep.mkdir()
    kernel = deep / "02_gemm_tma_with_a_long_file_name.cu"
    kernel.write_text((CONTROLS / "02_gemm_tma.cu").read_text())
    r = _eval([str(kernel), "--problem", "gemm_n7168_k5120"], compile_cache_dir)
    assert r.returncode == 3, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if "no GPU is available" in ln]
    assert f"({kernel} compiled)" in line and line.endswith("need a GPU host")


def test_bad_input_is_one_line(tmp_path):
    r = _eval([str(CONTROLS / "02_gemm_tma.cu"), "--problem", "no_such_problem"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no_such_problem" in r.stderr


def test_a_triton_file_is_validated_then_not_evaluated_without_a_gpu(tmp_path):
    r = _eval([str(CONTROLS / "triton" / "01_gemm_mma_sync.py"), "--problem", "gemm_n7168_k5120", "--json"], tmp_path)
    assert r.returncode == 3, r.stderr
    env = json.loads(r.stdout)
    assert env["status"] == "NOT_EVALUATED" and env["compile"]["flags"] == ["triton"]
    r = _eval([str(CONTROLS / "triton" / "03_torch_fallback_alias.py"), "--problem", "gemm_n7168_k5120", "--json"],
              tmp_path)
    assert r.returncode == 1 and json.loads(r.stdout)["status"] == "REJECTED"


def test_a_language_nothing_judges_is_one_line(tmp_path):
    r = _eval([str(CONTROLS / "triton" / "01_gemm_mma_sync.py"), "--problem", "gemm_n7168_k5120", "--language",
               "python"], tmp_path)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--language" in r.stderr


def test_judge_candidate_raises_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXBENCH_FORCE_NO_GPU", "1")
    src = (CONTROLS / "08_host_exit.cu").read_text()
    with pytest.raises(NoGPUError):
        judge_candidate(src, get_problem("gemm_n7168_k5120"), HOPPER, JudgeConfig(cache_dir=tmp_path))


# Static SASS verdicts of every control (what the CPU can know before any GPU run).
STATIC = {
    "01_gemm_cuda_core.cu": StaticTarget.ABSENT, "02_gemm_tma.cu": StaticTarget.PRESENT,
    "03_gemm_wgmma_never_launched.cu": StaticTarget.PRESENT, "04_gemm_dummy_gmma.cu": StaticTarget.ABSENT,
    "05_gemm_wrong_layout.cu": StaticTarget.ABSENT, "06_gemm_oob_write.cu": StaticTarget.ABSENT,
    "07_hang.cu": StaticTarget.ABSENT, "08_host_exit.cu": StaticTarget.ABSENT,
    "09_lazy_first_call.cu": StaticTarget.ABSENT, "10_pointer_cache.cu": StaticTarget.ABSENT,
    "11_side_stream.cu": StaticTarget.ABSENT, "13_dlopen_cublas.cu": StaticTarget.ABSENT,
    "14_attention_correct.cu": StaticTarget.ABSENT, "15_attention_wrong_lse.cu": StaticTarget.ABSENT,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_verdicts_of_controls(name, compile_cache_dir):
    problem = "mha_with_lse_d128_causal" if "attention" in name else "gemm_n7168_k5120"
    res = cpu_stages((CONTROLS / name).read_text(), get_problem(problem), HOPPER, JudgeConfig(cache_dir=compile_cache_dir))
    assert res.status is EvaluationStatus.NOT_EVALUATED, res.reason
    assert res.sass.target_static is STATIC[name]
    if name == "04_gemm_dummy_gmma.cu":
        assert res.sass.excluded and "gdesc[URZ]" in res.sass.excluded[0]
    if name == "02_gemm_tma.cu":
        assert res.sass.family_counts.get("tma", 0) >= 2
