"""Probe (GPU host): where a prestarted Nsight Compute counting run spends its seconds after its request (issue 27).

The judge's ncu run of a new candidate takes 2.0-2.4 s of the critical path on the H200 although it was started
ahead (interpreter and imports done, nothing on the GPU). This probe runs the very command the judge builds
(`ncu_tool()` flags, the profile child's inputs and calls) with the child's steps stamped on CLOCK_MONOTONIC
(shared by every process of the host), so the time after the request splits into: seeing the request, the CUDA
context (under ncu's injection), the inputs, loading the module, the calls (the last one profiled), and what
follows the child's last line (ncu building its report and printing the source page). Arms:

  plain            the stamped child alone (no tool)
  ncu              the stamped child under the judge's ncu flags, prestarted as the judge does
  ncu, cuda first  the same, with the CUDA context made before the request (what a waiting run would hold)
  memcheck         the stamped child under the judge's memcheck flags and environment
  ..., fast exit   the child ends with os._exit(0) right after its last line (no interpreter teardown)

Every tool run's output is read by the judge's own parsers (ncu: the evidence, its counts; memcheck: the gate's
outcome), printed beside the times, so an arm that breaks the tool's report shows as such.
    python -m research.timing.ncu_phases [KERNEL.cu] [--problem gemm_n7168_k5120] [--repeats 3] [--out FILE]

A research probe, outside the judge's sandbox: it decides nothing; what it shows goes into RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAMP = "ncu_phases stamp"
PHASES = ("request", "seen", "cuda", "inputs", "loaded", "calls", "printed", "exit")
ARMS = ("plain", "plain, fast exit", "ncu", "ncu, fast exit", "ncu, cuda first", "memcheck", "memcheck, fast exit")


def _stamp(name: str) -> None:
    print(f"{STAMP} {name} {time.monotonic():.6f}", file=sys.stderr, flush=True)


def child(argv: list[str]) -> int:
    """The profile child's work (ptxcore.gpu.child.standalone.run_standalone), stamped step by step."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--request", type=Path, required=True)
    ap.add_argument("--cuda-first", action="store_true")
    ap.add_argument("--fast-exit", action="store_true")
    args = ap.parse_args(argv)
    from ptxcore.gpu.child import standalone

    standalone.import_for_run()
    import torch

    from ptxcore.gpu.harness.workloads import allocate_outputs, call_args, generate_inputs, resolve_spec
    from ptxcore.problems import get_problem

    if args.cuda_first:
        torch.cuda.set_device(0)
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
    _stamp("ready")
    req = standalone.await_request(args.request, poll_s=0.005)
    _stamp("seen")
    problem = get_problem(req["problem"])
    spec = resolve_spec(problem, problem.workload(req["workload"]))
    torch.cuda.set_device(req["device"])
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    _stamp("cuda")
    values = {**generate_inputs(problem, spec, req["seed"]), **allocate_outputs(spec)}
    torch.cuda.synchronize()
    _stamp("inputs")
    import tvm_ffi

    from ptxcore.gpu.child import driver

    driver.preload_global()
    fn = tvm_ffi.load_module(req["library"])["run"]
    _stamp("loaded")
    argv_ = call_args(spec, values)
    with tvm_ffi.use_torch_stream():
        for i in range(req["calls"]):
            if i == req["calls"] - 1:
                with torch.cuda.nvtx.range(standalone.NVTX_RANGE):
                    fn(*argv_)
                    torch.cuda.synchronize()
            else:
                fn(*argv_)
        torch.cuda.synchronize()
    _stamp("calls")
    print(f"ptxbench child: {req['calls']} call(s) completed", flush=True)
    _stamp("printed")
    if args.fast_exit:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def one_run(arm: str, library: Path, problem: str, workload: str, seed: int, calls: int
            ) -> tuple[dict[str, float], str]:
    """One prestarted run of `arm`: start it, wait for its ready stamp, write the request, wait for its end; its
    times from the request and what the judge's parser makes of the tool's output."""
    from ptxcore.gpu.harness.ncu import ncu_tool
    from ptxcore.gpu.harness.sanitizer import MEMCHECK_ENV, memcheck_tool

    with tempfile.TemporaryDirectory(prefix="ncu-phases-") as tmp:
        request = Path(tmp) / "request.json"
        cmd = [sys.executable, "-m", "research.timing.ncu_phases", "--child", "--request", str(request)]
        cmd += ["--cuda-first"] if "cuda first" in arm else []
        cmd += ["--fast-exit"] if "fast exit" in arm else []
        env = dict(os.environ)
        if arm.startswith("ncu"):
            cmd = [*ncu_tool(), *cmd]
        elif arm.startswith("memcheck"):
            cmd = [*memcheck_tool(), *cmd]
            env.update(MEMCHECK_ENV)
        out_file = open(Path(tmp) / "stdout.txt", "w+")  # noqa: SIM115 - read back below; the source page is large
        proc = subprocess.Popen(cmd, stdout=out_file, stderr=subprocess.PIPE, text=True, env=env)
        stamps: dict[str, float] = {}
        lines: list[str] = []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith(STAMP):
                _, _, name, value = line.split()
                stamps[name] = float(value)
                if name == "ready":
                    aside = request.with_suffix(".tmp")
                    aside.write_text(json.dumps({"library": str(library), "problem": problem, "workload": workload,
                                                 "seed": seed, "device": 0, "calls": calls}))
                    stamps["request"] = time.monotonic()
                    os.replace(aside, request)
        proc.wait()
        stamps["exit"] = time.monotonic()
        out_file.seek(0)
        out = out_file.read()
        out_file.close()
        if "call(s) completed" not in out or "request" not in stamps:
            raise SystemExit(f"ncu_phases: {arm} failed (exit {proc.returncode}): {''.join(lines)[-1500:]}")
        return ({p: stamps[p] - stamps["request"] for p in PHASES if p in stamps},
                _verdict(arm, out + "".join(lines), proc.returncode))


def _verdict(arm: str, text: str, returncode: int) -> str:
    """What the judge's parser concludes from the tool's output."""
    from ptxcore.arch import get_architecture
    from ptxcore.gpu.harness.ncu import evidence_from_text
    from ptxcore.gpu.harness.sanitizer import parse_memcheck

    if arm.startswith("ncu"):
        ev = evidence_from_text(text, get_architecture("hopper"), returncode, "ncu")
        return f"{ev.status.value} {ev.family_thread_inst_executed}"
    if arm.startswith("memcheck"):
        outcome, errors, _ = parse_memcheck(text, returncode)
        return f"{outcome.value} ({errors} errors, exit {returncode})"
    return f"exit {returncode}"


def table(runs: dict[str, list[dict[str, float]]]) -> str:
    """Per arm, the median seconds from the request to each step, then each step's own median."""
    head = f"{'arm':16}" + "".join(f"{p:>9}" for p in PHASES[1:])
    lines = ["seconds from the request (medians)", head, "-" * len(head)]
    for arm, rs in runs.items():
        lines.append(f"{arm:16}" + "".join(f"{statistics.median(r[p] for r in rs):9.3f}" for p in PHASES[1:]))
    lines += ["", "each step's own seconds (medians)", head, "-" * len(head)]
    for arm, rs in runs.items():
        cells = [statistics.median(r[b] - r[a] for r in rs) for a, b in zip(PHASES, PHASES[1:], strict=False)]
        lines.append(f"{arm:16}" + "".join(f"{c:9.3f}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1:])
    ap = argparse.ArgumentParser(prog="ncu_phases")
    ap.add_argument("kernel", nargs="?", default="solutions/gemm_n7168_k5120/wgmma_tma_ws.cu")
    ap.add_argument("--problem", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
    from ptxcore.problems import get_problem

    problem = args.problem or Path(args.kernel).parent.name
    built = compile_candidate(Path(args.kernel).read_text(), BuildOptions(get_architecture("hopper")),
                              CompileCache(Path(tempfile.mkdtemp(prefix="ncu-phases-cache-"))))
    if built.artifact is None:
        print(f"ncu_phases: {args.kernel} did not build: {built.result.reason}", file=sys.stderr)
        return 1
    p = get_problem(problem)
    workload, seed = p.workload(None).uuid, p.extension.seed
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    verdicts: dict[str, list[str]] = {arm: [] for arm in ARMS}
    for i in range(args.repeats):
        for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
            times, verdict = one_run(arm, built.artifact, problem, workload, seed, args.calls)
            runs[arm].append(times)
            verdicts[arm].append(verdict)
            print(f"repeat {i + 1} {arm}: {times['exit']:.3f} s; {verdict}", flush=True)
    print(table(runs))
    print("\nwhat the judge's parsers concluded, per arm:")
    for arm, vs in verdicts.items():
        print(f"  {arm}: {'; '.join(sorted(set(vs)))}")
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": runs, "verdicts": verdicts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
