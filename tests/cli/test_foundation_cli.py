"""`ptxbench problems ...` and `ptxbench compile ...`: outputs, JSON envelope, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flows.cli.main import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _cache(monkeypatch, compile_cache_dir):
    monkeypatch.setenv("PTXBENCH_CACHE_DIR", str(compile_cache_dir))


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_problems_list_and_show():
    r = invoke("problems", "list", "--json")
    assert r.exit_code == 0
    rows = json.loads(r.stdout)
    assert len(rows) == 16 and {"name", "baseline", "workload"} <= set(rows[0])
    table = invoke("problems", "list")
    assert table.exit_code == 0 and "gemm_n7168_k5120" in table.stdout
    shown = json.loads(invoke("problems", "show", "mha_bwd_d128", "--json").stdout)
    assert shown["definition"]["name"] == "mha_bwd_d128"
    assert shown["extension"]["baseline"]["library"] == "cudnn"


def test_compile_example_json_envelope(repo_root):
    r = invoke("compile", str(repo_root / "examples" / "gemm_cuda_core.cu"), "--problem", "gemm_n7168_k5120",
               "--arch", "h100", "--json")
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["status"] == "COMPILED"
    assert {"status", "log", "resources", "sass"} <= set(env)
    assert env["sass"]["target_static"] == "absent"  # CUDA cores only
    assert env["sass"]["counts"].get("FFMA", 0) > 0
    assert env["resources"]["kernels"][0]["registers"] > 0


def test_compile_piped_never_cuts_an_identifier_and_names_dynamic_shared_memory(repo_root):
    """Piped, the mangled kernel name was folded at 80 columns, and a TMA kernel whose shared memory is all dynamic
    read "0 B smem"."""
    r = invoke("compile", str(repo_root / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu"), "-p",
               "gemm_n7168_k5120")
    assert r.exit_code == 0, r.output
    (line,) = [ln for ln in r.stdout.splitlines() if " regs, " in ln]
    name = line.strip().split(":")[0]
    assert name.startswith("_Z") and len(line) > 80  # one line, however long
    assert " B static smem + dynamic (sized at launch), " in line
    env = json.loads(invoke("compile", str(repo_root / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu"), "-p",
                            "gemm_n7168_k5120", "--json").stdout)
    assert env["dynamic_smem"] is True and env["resources"]["kernels"][0]["function"] == name
    plain = invoke("compile", str(repo_root / "examples" / "gemm_cuda_core.cu"), "-p", "gemm_n7168_k5120")
    assert " B static smem, " in plain.stdout and "dynamic" not in plain.stdout


def test_compile_rejected_and_error_exit_codes(fixtures_dir):
    r = invoke("compile", str(fixtures_dir / "kernels" / "cublas_include.cu"), "-p", "gemm_n7168_k5120", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["status"] == "REJECTED"


def test_compile_picks_triton_for_a_py_file_as_eval_does(repo_root, monkeypatch):
    """A .py file is a Triton candidate (the validator, never nvcc); --language overrides the suffix."""
    from ptxcore.compile import CompiledCandidate
    from ptxcore.compile import language as language_module
    from ptxcore.schema import CompileResult, CompileStatus

    nvcc_runs = []

    def fake_nvcc_stage(source, options, cache=None):
        nvcc_runs.append(source)
        return CompiledCandidate(CompileResult(status=CompileStatus.REJECTED, source_sha256="0" * 64,
                                               arch=options.arch.key, reason="fake", log="fake"), None, None)

    monkeypatch.setattr(language_module, "compile_candidate", fake_nvcc_stage)
    solution = repo_root / "solutions" / "triton" / "gemm_n7168_k5120" / "tma_persistent.py"
    r = invoke("compile", str(solution), "-p", "gemm_n7168_k5120", "--json")
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["status"] == "COMPILED" and env["flags"] == ["triton"] and env["sass"] is None
    hostile = repo_root / "tests" / "fixtures" / "controls" / "triton" / "02_torch_fallback_getattr.py"
    r = invoke("compile", str(hostile), "-p", "gemm_n7168_k5120", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["reason"].startswith("rejected [reflection]")
    human = invoke("compile", str(hostile), "-p", "gemm_n7168_k5120")
    assert human.exit_code == 1 and "rejected [reflection]" in " ".join(human.stdout.split())
    assert nvcc_runs == []
    r = invoke("compile", str(solution), "-p", "gemm_n7168_k5120", "--language", "cuda", "--json")
    assert r.exit_code == 1 and len(nvcc_runs) == 1  # forced to CUDA: the nvcc stage is asked


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("compile", "missing.cu", "-p", "gemm_n7168_k5120"), "no such file: missing.cu"),
        (("compile", "examples", "-p", "gemm_n7168_k5120"), "is a directory"),
        (("compile", "examples/gemm_cuda_core.cu", "-p", "nope"), "unknown problem 'nope'"),
        (("compile", "examples/gemm_cuda_core.cu", "-p", "gemm_n7168_k5120", "--arch", "ampere"),
         "unknown architecture 'ampere'"),
        (("compile", "examples/gemm_cuda_core.cu", "-p", "gemm_n7168_k5120", "--language", "tilelang"),
         "--language 'tilelang'"),
        (("problems", "show", "nope"), "unknown problem 'nope'"),
    ],
)
def test_bad_input_is_one_line_without_traceback(args, needle, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    r = invoke(*args)
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("error:")
    assert "Traceback" not in r.output


def test_missing_nvcc_is_one_line(monkeypatch, repo_root, tmp_path):
    monkeypatch.setenv("PTXBENCH_NVCC", str(tmp_path / "no-nvcc-here"))
    monkeypatch.setenv("PATH", str(tmp_path))
    from ptxcore.compile import nvcc

    nvcc.toolkit_version.cache_clear()
    src = tmp_path / "k.cu"
    src.write_text("// a new source, not in any cache\n__global__ void k() {}\n")
    r = invoke("compile", str(src), "-p", "gemm_n7168_k5120")
    nvcc.toolkit_version.cache_clear()
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "nvcc not found" in r.output


def test_the_cli_starts_with_a_typer_that_lacks_the_flag_display_hook():
    """The GPU image's typer predates `TyperOption.display_type_rich`; the CLI must start there too (it did not:
    every `ptxbench` command on the H200 died with an AttributeError)."""
    import subprocess
    import sys

    code = ("import typer.core as c\n"
            "for k in c.TyperOption.__mro__:\n"
            "    if 'display_type_rich' in vars(k):\n"
            "        delattr(k, 'display_type_rich')\n"
            "import sys; sys.argv = ['ptxbench', 'problems', 'list']\n"
            "from flows.cli.main import app\n"
            "app()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "gemm_n7168_k5120" in out.stdout


def test_a_campaign_needs_no_bm25s_unless_it_retrieves_repair_notes():
    """The GPU image has no bm25s: `ptxbench campaign run` died there at import (2026-12-01), though only repair
    retrieval uses it."""
    import subprocess
    import sys

    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'bm25s':\n"
            "            raise ImportError('no bm25s here')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import flows.campaign, flows.adapt\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
