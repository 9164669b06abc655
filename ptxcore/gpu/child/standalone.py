"""The candidate under an external tool: compute-sanitizer memcheck or Nsight Compute.

The candidate's process again, but generating its own inputs from a seed with torch (no judge pipe), so
this module may use the harness's workload generator; `profile` brackets the last call in one NVTX range.
Variants: a TVM-FFI library (`--library`), or a Triton kernel.py (`--triton-source`, `--triton-cache`: the
judge session's private Triton cache, so the cubins and autotuning choices of the session are the ones run).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from ptxcore.gpu.child import driver

NVTX_RANGE = "ptxbench_call"


def _candidate(args: argparse.Namespace) -> tuple[Callable, contextlib.AbstractContextManager]:
    """The candidate's entry point and the stream context its calls run in."""
    if args.triton_source:
        from ptxcore.triton.session import TritonSession

        session = TritonSession(Path(args.triton_source), Path(args.triton_cache))
        return (lambda *argv: session.call(list(argv))), contextlib.nullcontext()  # torch's current stream
    import tvm_ffi

    driver.preload_global()
    return tvm_ffi.load_module(args.library)["run"], tvm_ffi.use_torch_stream()


def run_standalone(args: argparse.Namespace, profile: bool) -> int:
    """sanitize / profile: generate inputs, call the candidate `calls` times (one NVTX range if profiling)."""
    import torch

    from ptxcore.gpu.harness.workloads import allocate_outputs, call_args, generate_inputs, resolve_spec
    from ptxcore.problems import get_problem

    problem = get_problem(args.problem)
    spec = resolve_spec(problem, problem.workload(args.workload))
    torch.cuda.set_device(args.device)
    values = {**generate_inputs(problem, spec, args.seed), **allocate_outputs(spec)}
    torch.cuda.synchronize()
    fn, stream = _candidate(args)
    argv = call_args(spec, values)
    with stream:
        for i in range(args.calls):
            if profile and i == args.calls - 1:
                with torch.cuda.nvtx.range(NVTX_RANGE):
                    fn(*argv)
                    torch.cuda.synchronize()
            else:
                fn(*argv)
        torch.cuda.synchronize()
    print(f"ptxbench child: {args.calls} call(s) completed", flush=True)
    ended = end_detached_processes()
    if ended:
        print(f"ptxbench child: ended {ended} process(es) the candidate left running in another session", flush=True)
    return 0


def end_detached_processes(proc: Path = Path("/proc")) -> int:
    """In the candidate's sandbox only (its PID namespace, whose init is bubblewrap): kill every process that is
    neither this one nor one of its ancestors (the tool that runs it) and that left this process's session, so
    that a process the candidate detached cannot keep compute-sanitizer or ncu waiting for it. Returns how many.
    A candidate that stops this from running leaves the tool waiting; the memcheck gate then fails it
    (harness.sanitizer: LEFT_RUNNING)."""
    if not _in_bwrap_namespace(proc):
        return 0
    keep = set(_ancestors(proc)) | {1, os.getpid()}
    mine = os.getsid(0)
    ended = 0
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in keep:
            continue
        try:
            if os.getsid(int(entry.name)) == mine:
                continue
            os.kill(int(entry.name), signal.SIGKILL)
            ended += 1
        except (ProcessLookupError, PermissionError):
            continue
    return ended


def _in_bwrap_namespace(proc: Path) -> bool:
    try:
        argv0 = (proc / "1" / "cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False
    return Path(argv0.decode(errors="replace")).name == "bwrap"


def _ancestors(proc: Path) -> list[int]:
    out, pid = [], os.getppid()
    while pid > 1 and pid not in out:
        out.append(pid)
        try:
            stat = (proc / str(pid) / "stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out
