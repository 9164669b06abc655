"""nvcc's two chains side by side (ptxcore.compile.plan) against plain nvcc, real nvcc in the real sandbox: the
plan is read from nvcc's own dry run, and a build through it gives plain nvcc's verdict, reason, log and device
code (up to the module id) for kernels that compile, fail on the host side, fail on the device side, fail in
ptxas, or are refused by the gate; a failed host chain leaves the keep directory as nvcc's would."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile.nvcc import KEEP_DIR, nvcc_command
from ptxcore.compile.plan import GEN_MODULE_ID, parse_dryrun, script
from ptxcore.compile.toolchain import compile_policy, toolchain
from ptxcore.schema import CompileStatus

HOPPER = get_architecture("hopper")
NAMES = re.compile(r"_GLOBAL__N__[0-9a-f]{8}_\d+_kernel_cu_[0-9a-f]{8}|Compile time = [0-9.]+ ms")
"""An anonymous namespace's mangled name carries the module id: the one part of the device code that differs
(and ptxas's own compile time, which differs from run to run)."""

HOST_ERROR = "__global__ void k(float* x) { x[0] = 1.0f; }\nvoid host_only() { undefined_host_name(); }\n"
DEVICE_ERROR = ("__global__ void k(float* x) { x[0] = 1.0f; }\n"
                "#ifdef __CUDA_ARCH__\n__device__ int f() { return undefined_device_name; }\n#endif\n")
PTXAS_ERROR = '__global__ void k() { asm volatile("bogus.instruction;"); }\n'
# A host-side error and, in device code only, an include outside the allowed roots (through a macro, past the
# fast source check): nvcc stops at cudafe++ and never preprocesses the device side, so the gate must not see
# that include (COMPILE_ERROR, as with nvcc). Without the host error it is REJECTED (the gate's own tests).
HOST_ERROR_HIDES_DEVICE_PASS = ("__global__ void k(float* x) { x[0] = 1.0f; }\n"
                                "void host_only() { undefined_host_name(); }\n"
                                "#ifdef __CUDA_ARCH__\n#define OUTSIDE \"/usr/lib/os-release\"\n"
                                "#include OUTSIDE\n#endif\n")


def _dryrun(options: BuildOptions) -> str:
    tc = toolchain(HOPPER.key)
    cmd = nvcc_command("/scratch/kernel.cu", "/scratch/kernel.so", f"/scratch/{KEEP_DIR}", options, tc)
    env = {"PATH": compile_policy(tc, 60, 1 << 33).env["PATH"], "LC_ALL": "C"}
    out = subprocess.run([*cmd, "--dryrun"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_the_plan_is_nvccs_own_steps_with_the_module_id_written_first():
    text = _dryrun(BuildOptions(HOPPER))
    plan = parse_dryrun(text)
    assert plan is not None
    steps = [ln[3:] for ln in text.splitlines() if ln.startswith("#$ ") and "=" not in ln[3:].split()[0]]
    ours = [*plan.prelude, *plan.host, *plan.device, *plan.tail]
    assert len(ours) == len(steps)  # every step of nvcc's, none added
    assert [s for s in ours if GEN_MODULE_ID in s] == []
    assert sum(GEN_MODULE_ID in s for s in steps) == 1
    assert plan.module_id_file == f"/scratch/{KEEP_DIR}/kernel.module_id"
    text_script = script(plan, "_00000000_9_kernel_cu_00000000", f"/scratch/{KEEP_DIR}")
    assert all(s in text_script for s in (*plan.host[:1], *plan.device, *plan.tail))


@pytest.mark.parametrize("extra", [("-gencode=arch=compute_90,code=sm_90",), ("-gencode=arch=compute_100a,code=sm_100a",)])
def test_steps_the_plan_does_not_know_are_left_to_nvcc(extra):
    """A second target (two cicc runs, two ptxas): plain nvcc."""
    assert parse_dryrun(_dryrun(BuildOptions(HOPPER, extra_flags=extra))) is None


def test_a_dry_run_without_the_module_id_handshake_is_refused():
    text = _dryrun(BuildOptions(HOPPER)).replace(GEN_MODULE_ID, "")
    assert parse_dryrun(text) is None


def _both(source: str) -> tuple:
    out = []
    for two in (True, False):
        with tempfile.TemporaryDirectory() as d:
            c = compile_candidate(source, BuildOptions(HOPPER, two_chains=two), CompileCache(Path(d)))
            sass = c.sass.model_dump(mode="json") if c.sass is not None else None
            out.append((c.result.status, c.result.reason, NAMES.sub("NS", c.result.log),
                        NAMES.sub("NS", repr(sass))))
    return tuple(out)


@pytest.mark.parametrize("name", ["wgmma_sm90.cu", "syntax_error.cu", "cublas_include.cu", "dummy_gmma_sm90.cu"])
def test_a_library_kernel_gets_plain_nvccs_verdict(fixtures_dir, name):
    two, plain = _both((fixtures_dir / "kernels" / name).read_text())
    assert two == plain


@pytest.mark.parametrize("source,status", [
    (HOST_ERROR, CompileStatus.COMPILE_ERROR),
    (DEVICE_ERROR, CompileStatus.COMPILE_ERROR),
    (PTXAS_ERROR, CompileStatus.COMPILE_ERROR),
    (HOST_ERROR_HIDES_DEVICE_PASS, CompileStatus.COMPILE_ERROR),
])
def test_a_failing_build_fails_as_with_plain_nvcc(source, status):
    two, plain = _both(source)
    assert two[0] is status and two == plain


def test_the_gemm_solution_builds_the_same_device_code(repo_root):
    source = (repo_root / "solutions" / "gemm_n7168_k5120" / "wgmma_tma_ws.cu").read_text()
    two, plain = _both(source)
    assert two[0] is CompileStatus.COMPILED and two == plain


def test_the_script_takes_nothing_from_the_candidate(monkeypatch):
    """The source is a file the steps read; the script is nvcc's steps and our paths alone, the same whatever the
    candidate wrote (shell text in it included)."""
    from ptxcore.compile import build

    scripts: list[str] = []
    real = build.script
    monkeypatch.setattr(build, "script", lambda *a: scripts.append(real(*a)) or scripts[-1])
    hostile = ("// '; touch /scratch/owned; echo '\n// $(touch /scratch/owned) `id` \"$HOME\"\n"
               "__global__ void k(float* x) { x[0] = 1.0f; }\n")
    for source in (hostile, "__global__ void k(float* x) { x[0] = 2.0f; }\n"):
        with tempfile.TemporaryDirectory() as d:
            c = compile_candidate(source, BuildOptions(HOPPER), CompileCache(Path(d)))
            assert c.result.status is CompileStatus.COMPILED, c.result.log
    assert len(scripts) == 2 and scripts[0] == scripts[1] and "owned" not in scripts[0]


# ---- the script itself, on stand-in steps (no nvcc) -----------------------------------------------------------

def _run_plan(tmp_path, host, device, tail=("echo tail-ran",)):
    from ptxcore.compile.plan import Plan

    keep = tmp_path / "keep"
    keep.mkdir()
    plan = Plan(env=("GREETING=hello world",), prelude=(f"rm {keep}/stale",), host=host, device=device,
                tail=tail, module_id_file=str(keep / "kernel.module_id"))
    (keep / "stale").write_text("x")
    text = script(plan, "_00000000_9_kernel_cu_00000000", str(keep))
    t0 = __import__("time").monotonic()
    out = subprocess.run(["/bin/bash", "-c", text], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    return out, __import__("time").monotonic() - t0, keep


def test_the_steps_run_in_nvccs_order_of_output_and_the_tail_after(tmp_path):
    keep = tmp_path / "keep"
    out, _, keep = _run_plan(tmp_path, host=("echo h0", f"cat {keep}/kernel.module_id; echo; echo $GREETING"),
                             device=("echo d0", "echo d1 >&2", "echo d2", "echo d3"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["h0", "_00000000_9_kernel_cu_00000000", "hello", "world", "d0", "d2", "d3",
                                  "tail-ran"]
    assert out.stderr.strip() == "d1" and not (keep / "stale").exists()


def test_a_failed_host_chain_ends_the_device_chain_and_its_files(tmp_path):
    keep = tmp_path / "keep"
    out, wall, keep = _run_plan(tmp_path, host=("echo h0", "echo host error >&2; exit 2"),
                                device=(f"touch {keep}/device.ii", "sleep 30", "echo d2", "echo d3"))
    assert out.returncode == 2 and "host error" in out.stderr and "tail-ran" not in out.stdout
    assert wall < 10  # nvcc would never have started the device chain: nothing waits for it
    assert sorted(p.name for p in keep.iterdir()) == []  # no device pass, no module id: nvcc's keep directory
    ps = subprocess.run(["pgrep", "-f", "sleep 30"], capture_output=True, text=True)
    assert ps.stdout.strip() == ""


def test_a_failed_device_step_is_the_builds_status_after_the_host_chains_output(tmp_path):
    out, _, _ = _run_plan(tmp_path, host=("echo h0", "echo h1"),
                          device=("echo d0", "echo ptxas error >&2; exit 255", "echo never", "echo never"))
    assert out.returncode == 255 and out.stdout.split() == ["h0", "h1", "d0"] and "never" not in out.stdout
    assert "ptxas error" in out.stderr and "tail-ran" not in out.stdout
