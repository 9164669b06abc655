"""The isolated child process: runs one candidate (or the trusted baseline) for the judge.

    python -m ptxcore.gpu.child session  --cmd-fd R --reply-fd W [--device N]
    python -m ptxcore.gpu.child sanitize --library kernel.so --problem NAME --workload UUID --seed S
    python -m ptxcore.gpu.child profile  --library kernel.so --problem NAME --workload UUID --seed S

`session` (correctness and timing): imports no torch or cupy in candidate mode, so no cuBLAS/cuDNN is
mapped unless the candidate loads it; works on IPC-mapped buffers owned by the judge, which keeps the
reference outputs in its own process where this one cannot reach them. Every call is bracketed by a
device synchronisation and CUPTI timestamps. `sanitize` (under compute-sanitizer memcheck) and `profile`
(under ncu) generate their own inputs from a seed with torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from . import driver
from .protocol import Channel
from .timing import ActivityRecord, CallWindow, assign_records

CALIBRATION_TAG = -1
NVTX_RANGE = "ptxbench_call"


class Session:
    """State of a `session` child; one method per command."""

    def __init__(self, device: int) -> None:
        from .timing import CuptiRecorder

        self.device = device
        driver.init_primary_context(device)
        driver.clear_persisting_l2()  # the driver's default set-aside is not 0: start every candidate at 0
        self.recorder = CuptiRecorder()
        self.windows: list[CallWindow] = []
        self.records: list[ActivityRecord] = []
        self.fn = None
        self.mode = ""
        self.slots: dict[int, dict] = {}
        self._calibrate()

    def _calibrate(self) -> None:
        """A memset on the NULL stream (the TVM-FFI environment stream here) names that stream's CUPTI id."""
        scratch = driver.mem_alloc(4096)
        t0 = self.recorder.now_ns()
        driver.memset_d8_async(scratch, 0, 4096, 0)
        driver.synchronize()
        self.windows.append(CallWindow(CALIBRATION_TAG, t0, self.recorder.now_ns()))

    def load(self, msg: dict) -> dict:
        self.mode = msg["mode"]
        if self.mode == "ffi":
            import tvm_ffi

            module = tvm_ffi.load_module(msg["library"])
            self.fn = module["run"]
        else:
            from ptxcore.problems import get_problem

            from .baselines import get_baseline

            self.fn = get_baseline(get_problem(msg["problem"]))
        return {"ok": True}

    def bind(self, msg: dict) -> dict:
        from .dlpack import RawTensor

        raws, mapped = [], []
        for t in msg["tensors"]:
            if t.get("handle") is None:
                raws.append((t["name"], t["scalar"]))
                continue
            ptr = driver.ipc_open(bytes.fromhex(t["handle"]))
            mapped.append(ptr)
            raws.append((t["name"], RawTensor(ptr, tuple(t["shape"]), t["dtype"], device_id=self.device)))
        self.slots[msg["slot"]] = {"mapped": mapped, "args": self._wrap(raws), "raw": raws,
                                   "outputs": msg["outputs"]}
        return {"ok": True}

    def _wrap(self, raws: list) -> list:
        if self.mode == "ffi":
            import tvm_ffi

            return [tvm_ffi.from_dlpack(v) if hasattr(v, "__dlpack__") else v for _, v in raws]
        import torch

        return [torch.from_dlpack(v) if hasattr(v, "__dlpack__") else v for _, v in raws]

    def call(self, msg: dict) -> dict:
        slot = self.slots[msg["slot"]]
        t0 = self.recorder.now_ns()
        if self.mode == "ffi":
            self._call_ffi(slot["args"])
        else:
            results = self._call_baseline(slot)
        driver.synchronize()
        t1 = self.recorder.now_ns()
        self.windows.append(CallWindow(msg["tag"], t0, t1))
        if self.mode != "ffi":
            self._store_baseline(slot, results)
        l2_reset = driver.clear_persisting_l2()  # a candidate may not keep its data in L2 across calls
        return {"ok": True, "wall_ns": t1 - t0, "l2_reset": l2_reset}

    def _call_ffi(self, args: list) -> None:
        import tvm_ffi

        with tvm_ffi.use_raw_stream(tvm_ffi.device(f"cuda:{self.device}"), 0):
            self.fn(*args)

    def _call_baseline(self, slot: dict) -> dict:
        names = [n for n, _ in slot["raw"]]
        values = dict(zip(names, slot["args"], strict=True))
        return self.fn({n: values[n] for n in names if n not in slot["outputs"]})

    def _store_baseline(self, slot: dict, results: dict) -> None:
        names = [n for n, _ in slot["raw"]]
        values = dict(zip(names, slot["args"], strict=True))
        for name in slot["outputs"]:
            values[name].copy_(results[name].reshape(values[name].shape))
        driver.synchronize()

    def unbind(self, msg: dict) -> dict:
        slot = self.slots.pop(msg["slot"])
        slot["args"].clear()
        for ptr in slot["mapped"]:
            driver.ipc_close(ptr)
        return {"ok": True}

    def timings(self, _msg: dict) -> dict:
        self.records.extend(self.recorder.drain())
        calib = [w for w in self.windows if w.tag == CALIBRATION_TAG]
        env_streams = {r.stream_id for r in self.records if calib and calib[0].t0_ns <= r.start_ns <= calib[0].t1_ns}
        calls, stray = assign_records(self.windows, self.records, env_streams)
        return {
            "ok": True, "env_streams": sorted(env_streams),
            "calls": [[c.tag, c.span_ns, c.records, c.kernels, list(c.off_stream)]
                      for c in calls if c.tag != CALIBRATION_TAG],
            "stray": sorted({r.name for r in stray})[:20],
        }


def block_heavy_imports() -> None:
    """Candidate mode: tvm_ffi imports torch when it can, and torch maps cuBLAS/cuDNN into the process.
    Making `import torch` (and cupy) fail keeps those libraries out, so a mapped cuBLAS is the candidate's."""
    for name in ("torch", "cupy"):
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def run_session(cmd_fd: int, reply_fd: int, device: int, mode: str) -> int:
    if mode == "ffi":
        block_heavy_imports()
    chan = Channel(cmd_fd, reply_fd)
    try:
        session = Session(device)
    except Exception as exc:  # noqa: BLE001 - reported to the judge as an infrastructure fault
        chan.send({"ok": False, "stage": "init", "error": f"{type(exc).__name__}: {exc}"})
        return 4
    chan.send({"ok": True, "pid": os.getpid()})
    while True:
        msg = chan.recv()
        op = msg["op"]
        if op == "exit":
            chan.send({"ok": True})
            return 0
        try:
            chan.send(getattr(session, op)(msg))
        except Exception as exc:  # noqa: BLE001 - the candidate's fault, reported as a verdict
            sys.stderr.write(traceback.format_exc())
            sys.stderr.flush()
            chan.send({"ok": False, "stage": op, "error": f"{type(exc).__name__}: {exc}"[:2000]})
            return 3


def run_standalone(args: argparse.Namespace, profile: bool) -> int:
    """sanitize / profile: generate inputs, call the candidate `calls` times (one NVTX range if profiling)."""
    import torch
    import tvm_ffi

    from ptxcore.problems import get_problem

    from .workloads import allocate_outputs, call_args, generate_inputs, resolve_spec

    problem = get_problem(args.problem)
    spec = resolve_spec(problem, problem.workload(args.workload))
    torch.cuda.set_device(args.device)
    values = {**generate_inputs(problem, spec, args.seed), **allocate_outputs(spec)}
    torch.cuda.synchronize()
    fn = tvm_ffi.load_module(args.library)["run"]
    argv = call_args(spec, values)
    with tvm_ffi.use_torch_stream():
        for i in range(args.calls):
            if profile and i == args.calls - 1:
                with torch.cuda.nvtx.range(NVTX_RANGE):
                    fn(*argv)
                    torch.cuda.synchronize()
            else:
                fn(*argv)
        torch.cuda.synchronize()
    print(f"ptxbench child: {args.calls} call(s) completed", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ptxbench-child")
    p.add_argument("mode", choices=["session", "sanitize", "profile"])
    p.add_argument("--cmd-fd", type=int)
    p.add_argument("--reply-fd", type=int)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--session-mode", choices=["ffi", "baseline"], default="ffi")
    p.add_argument("--library")
    p.add_argument("--problem")
    p.add_argument("--workload")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--calls", type=int, default=1)
    args = p.parse_args(argv)
    if args.mode == "session":
        return run_session(args.cmd_fd, args.reply_fd, args.device, args.session_mode)
    return run_standalone(args, profile=args.mode == "profile")


if __name__ == "__main__":
    sys.exit(main())
