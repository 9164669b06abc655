"""On the GPU host: does CUDA work inside the candidate sandbox, and with which policy options?

    PTXBENCH_BWRAP=$PWD/.carry/bwrap/bwrap python3 benchmarks/device/sandbox_gpu_check.py --out $OUT

Each check runs in a fresh sandbox under the judge's own GPU-stage policy (ptxcore.gpu.harness.confine)
and prints one row
(check, policy variant, ok, seconds, detail); all rows go to $OUT/sandbox_gpu.json. Checks: the sandbox
starts (as nobody and as root), nvidia-smi, CUDA in Python (cupy) and memfd_create, CUDA IPC from a judge
process outside into the sandbox (PID/IPC namespaces on and off), loading a CPU-stage build (no -lcuda)
with libcuda preloaded RTLD_GLOBAL, compute-sanitizer and Nsight Compute on a tiny CUDA program (default
and profiling_admin), and that a detached process dies with its sandbox. About 2-4 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ptxcore.sandbox import RunAs, Sandbox, SandboxUnavailableError, check_available  # noqa: E402

VECADD = r"""
#include <cstdio>
__global__ void add(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
int main() {
  float* d; cudaMalloc(&d, 1024 * sizeof(float)); cudaMemset(d, 0, 1024 * sizeof(float));
  add<<<4, 256>>>(d, 1024); float h = 0; cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost);
  printf("vecadd %.1f\n", h); return h == 1.0f ? 0 : 1;
}
"""
IPC_CHILD = """
import sys, cupy
ptr = cupy.cuda.runtime.ipcOpenMemHandle(bytes.fromhex(sys.argv[1]))
mem = cupy.cuda.UnownedMemory(ptr, 4096, None)
print("ipc read", float(cupy.ndarray((1024,), cupy.float32, cupy.cuda.MemoryPointer(mem, 0))[7]))
"""
ROWS: list[dict] = []


def policy(name: str, **kw):
    """The judge's own GPU-stage policy (ptxcore.gpu.harness.confine), with `kw` (run_as, profiling_admin,
    unshare_*) changed for the variants."""
    from ptxcore.gpu.harness.confine import stage_policy

    if kw.get("profiling_admin"):
        kw["run_as"] = RunAs.CALLER
    return stage_policy(name.removeprefix("gpu-"), None).model_copy(update=kw)


def record(check: str, variant: str, fn) -> None:
    started = time.monotonic()
    try:
        ok, detail = fn()
    except (SandboxUnavailableError, OSError, subprocess.SubprocessError, ValueError) as exc:
        ok, detail = False, f"{type(exc).__name__}: {exc}"
    row = {"check": check, "variant": variant, "ok": ok, "seconds": round(time.monotonic() - started, 2),
           "detail": " ".join(str(detail).split())[:300]}
    ROWS.append(row)
    print(f"{check:<22} {variant:<26} {'ok' if ok else 'FAIL':<4} {row['seconds']:>6.2f} s  {row['detail']}",
          flush=True)


def in_box(pol, cmd: list[str], timeout_s: float = 120, files: dict[str, bytes] | None = None):
    with Sandbox(pol) as box:
        for name, data in (files or {}).items():
            (box.scratch / name).write_bytes(data)
            os.chmod(box.scratch / name, 0o755)
            box.give(box.scratch / name)
        out = box.run([c.replace("@SCRATCH@", box.inside()) for c in cmd], timeout_s=timeout_s)
    return out.ok, (out.stdout + out.stderr).strip()[-300:] or out.status.value


def environment() -> None:
    params = Path("/proc/driver/nvidia/params")
    admin = [ln for ln in params.read_text().splitlines() if "RmProfilingAdminOnly" in ln] if params.exists() else []
    print(f"uid {os.getuid()}  python {sys.version.split()[0]}  {admin or 'no /proc/driver/nvidia/params'}")
    ROWS.append({"check": "environment", "uid": os.getuid(), "profiling_admin_only": admin,
                 "bwrap": os.environ.get("PTXBENCH_BWRAP", "PATH")})


def checks(tmp: Path) -> None:
    auto, root = policy("gpu-auto"), policy("gpu-root", run_as=RunAs.CALLER)
    record("start", "auto (nobody if possible)", lambda: (check_available(auto) is None, "started"))
    record("start", "caller (root)", lambda: (check_available(root) is None, "started"))
    for name, pol in (("auto", auto), ("root", root)):
        record("nvidia-smi", name, lambda pol=pol: in_box(pol, ["nvidia-smi", "-L"]))
        record("cupy", name, lambda pol=pol: in_box(pol, [sys.executable, "-c",
               "import os, cupy; os.memfd_create('m'); print('sum', int(cupy.arange(10).sum()))"]))
    ipc(auto, root)
    tvm_load(root)
    tools(tmp, auto, root)
    marker = f"600.{random.randrange(10**9)}"
    record("no survivors", "auto", lambda: (in_box(auto, ["/bin/sh", "-c", f"setsid sleep {marker} &"])[0]
                                            and not _running(marker), "detached sleeper gone"))


def ipc(auto, root) -> None:
    try:
        import cupy
    except ImportError as exc:
        reason = f"no cupy here: {exc}"
        record("cuda ipc from judge", "-", lambda: (False, reason))
        return

    buf = cupy.arange(1024, dtype=cupy.float32)
    handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(buf.data.ptr)).hex()
    for name, pol in (("auto", auto), ("root", root), ("root, shared PID ns", root.model_copy(
            update={"unshare_pid": False})), ("root, shared IPC ns", root.model_copy(update={"unshare_ipc": False}))):
        record("cuda ipc from judge", name, lambda pol=pol: in_box(pol, [sys.executable, "-c", IPC_CHILD, handle]))


def tvm_load(pol) -> None:
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate

    src = (REPO / "solutions/gemm_n7168_k5120/wgmma_tma_ws.cu").read_text()
    built = []
    record("compile (sandboxed)", "gemm wgmma_tma_ws", lambda: (
        built.append(compile_candidate(src, BuildOptions(get_architecture("hopper")),
                                       CompileCache(Path(tempfile.mkdtemp()) / "c"))) or
        built[0].result.status.value == "COMPILED", built[0].result.reason or built[0].result.status.value))
    if not built or built[0].artifact is None:
        return
    so = built[0].artifact.read_bytes()
    for preload in (True, False):
        code = ("import ctypes, os\n" + ("ctypes.CDLL('libcuda.so.1', mode=os.RTLD_GLOBAL | os.RTLD_NOW)\n"
                                         if preload else "") +
                "import tvm_ffi\nm = tvm_ffi.load_module('@SCRATCH@/kernel.so')\nprint('loaded', m['run'])\n")
        record("load CPU build", "libcuda RTLD_GLOBAL" if preload else "no preload",
               lambda code=code: in_box(pol, [sys.executable, "-c", code], files={"kernel.so": so}))


def tools(tmp: Path, auto, root) -> None:
    exe = tmp / "vecadd"
    (tmp / "vecadd.cu").write_text(VECADD)
    subprocess.run(["nvcc", "-arch=sm_90", "-o", str(exe), str(tmp / "vecadd.cu")], check=True, timeout=300)
    files = {"vecadd": exe.read_bytes()}
    for name, pol in (("auto", auto), ("root", root)):
        record("compute-sanitizer", name, lambda pol=pol: in_box(
            pol, ["compute-sanitizer", "--tool", "memcheck", "@SCRATCH@/vecadd"], files=files))
        record("ncu", name, lambda pol=pol: in_box(
            pol, ["ncu", "--metrics", "smsp__inst_executed.sum", "@SCRATCH@/vecadd"], 300, files))
    admin = policy("gpu-ncu-admin", profiling_admin=True)
    record("ncu", "root, profiling_admin", lambda: in_box(
        admin, ["ncu", "--metrics", "smsp__inst_executed.sum", "@SCRATCH@/vecadd"], 300, files))


def _running(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = ap.parse_args()
    environment()
    with tempfile.TemporaryDirectory() as tmp:
        checks(Path(tmp))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sandbox_gpu.json").write_text(json.dumps(ROWS, indent=1))
    failed = [r for r in ROWS if r.get("ok") is False]
    print(f"{len(ROWS) - 1 - len(failed)} ok, {len(failed)} failed")


if __name__ == "__main__":
    main()
