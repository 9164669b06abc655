"""The candidate under an external tool: compute-sanitizer memcheck or Nsight Compute.

The candidate's process again, but generating its own inputs from a seed with torch (no judge pipe), so
this module may use the harness's workload generator; `profile` brackets the last call in one NVTX range.
Variants: a TVM-FFI library (`--library`), or a Triton kernel.py (`--triton-source`, `--triton-cache`: the
judge session's private Triton cache, so the cubins and autotuning choices of the session are the ones run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptxcore.gpu.child import driver

NVTX_RANGE = "ptxbench_call"
REQUEST_POLL_S = 0.005
REQUEST_WAIT_S = 3600.0
"""A child started before its candidate (`--request FILE`, ptxcore.gpu.harness.prestart) looks for the file every
5 ms and gives up after an hour (the judge replaces a waiting run long before)."""
REQUEST_FIELDS = {"library": str, "problem": str, "workload": str, "seed": int, "device": int, "calls": int}
PREPARE_NAME = "prepare.json"
"""Beside the request file, written before it (or never): the run's arguments without the library. The child
then makes its CUDA context and generates its inputs (the judge's code only: no candidate is in the sandbox yet)
while the candidate builds and runs its correctness, and waits on for the request (issue 27)."""
PREPARE_FIELDS = {name: kind for name, kind in REQUEST_FIELDS.items() if name != "library"}


class RequestError(ValueError):
    """The request file is missing past its wait, or is not the request the judge writes."""


def await_request(path: Path, poll_s: float = REQUEST_POLL_S, max_wait_s: float = REQUEST_WAIT_S,
                  on_prepare: Callable[[dict], object] | None = None) -> dict:
    """The judge's request once its file exists (the judge writes it whole: aside, then renamed): the candidate's
    library as this process sees it and the run's arguments. Call after the imports and before anything touches
    CUDA, so that a waiting process holds nothing on the GPU. `on_prepare`: called once with the preparation
    (PREPARE_NAME beside `path`) when it comes first; the request must then carry the same arguments."""
    deadline = time.monotonic() + max_wait_s
    prepare = path.with_name(PREPARE_NAME)
    prepared: dict | None = None
    while True:
        if on_prepare is not None and prepared is None and prepare.exists():  # first, even beside its request
            prepared = _read(prepare, "preparation", PREPARE_FIELDS)
            on_prepare(prepared)
            continue
        if path.exists():
            break
        if time.monotonic() > deadline:
            raise RequestError(f"no request at {path} within {max_wait_s:.0f} s")
        time.sleep(poll_s)
    data = _read(path, "request", REQUEST_FIELDS)
    if prepared is not None and {k: v for k, v in data.items() if k != "library"} != prepared:
        raise RequestError(f"request {path} does not carry the arguments of its preparation")
    return data


def _read(path: Path, what: str, fields: dict[str, type]) -> dict:
    """The judge's file at `path`, checked against `fields` (name: type)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RequestError(f"{what} {path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or set(data) != set(fields):
        raise RequestError(f"{what} {path} must have exactly the fields {', '.join(fields)}")
    for name, kind in fields.items():
        if type(data[name]) is not kind:
            raise RequestError(f"{what} field {name} must be {kind.__name__}, not {type(data[name]).__name__}")
    if data["calls"] < 1 or data["seed"] < 0 or data["device"] < 0:
        raise RequestError(f"{what} fields calls (>= 1), seed and device (>= 0) are out of range")
    return data


def requested(args: argparse.Namespace, data: dict) -> argparse.Namespace:
    """`args` with the request's fields in place of the command line's."""
    return argparse.Namespace(**{**vars(args), **data, "request": None, "triton_source": None, "triton_cache": None})


def import_for_run() -> None:
    """What run_standalone and a TVM-FFI candidate import (none of it touches CUDA): done before a prestarted
    child waits, so that its wait is all that is left of its start."""
    import torch  # noqa: F401
    import tvm_ffi  # noqa: F401

    import ptxcore.gpu.harness.workloads  # noqa: F401
    import ptxcore.problems  # noqa: F401


def _candidate(args: argparse.Namespace) -> tuple[Callable, contextlib.AbstractContextManager]:
    """The candidate's entry point and the stream context its calls run in."""
    if args.triton_source:
        from ptxcore.triton.session import TritonSession

        session = TritonSession(Path(args.triton_source), Path(args.triton_cache))
        return (lambda *argv: session.call(list(argv))), contextlib.nullcontext()  # torch's current stream
    import tvm_ffi

    driver.preload_global()
    return tvm_ffi.load_module(args.library)["run"], tvm_ffi.use_torch_stream()


@dataclass(frozen=True)
class PreparedRun:
    """A standalone run's CUDA context and inputs, made before its candidate is loaded: the workload's spec and
    the call's tensors (inputs from the seed, outputs allocated)."""

    spec: Any
    values: dict


def prepare_run(fields: dict) -> PreparedRun:
    """Set the device (the CUDA context), generate the inputs from the seed and allocate the outputs, from the
    run's arguments (PREPARE_FIELDS' names); the judge's code only."""
    import torch

    from ptxcore.gpu.harness.workloads import allocate_outputs, generate_inputs, resolve_spec
    from ptxcore.problems import get_problem

    problem = get_problem(fields["problem"])
    spec = resolve_spec(problem, problem.workload(fields["workload"]))
    torch.cuda.set_device(fields["device"])
    values = {**generate_inputs(problem, spec, fields["seed"]), **allocate_outputs(spec)}
    torch.cuda.synchronize()
    return PreparedRun(spec, values)


def run_standalone(args: argparse.Namespace, profile: bool, prepared: PreparedRun | None = None) -> int:
    """sanitize / profile: generate inputs (or take those `prepared` made from the same arguments), call the
    candidate `calls` times (one NVTX range if profiling)."""
    import torch

    from ptxcore.gpu.harness.workloads import call_args

    if prepared is None:  # else await_request checked that the request carries the preparation's arguments
        prepared = prepare_run({name: getattr(args, name) for name in PREPARE_FIELDS})
    fn, stream = _candidate(args)
    argv = call_args(prepared.spec, prepared.values)
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
