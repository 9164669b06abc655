"""`ptxbench eval KERNEL.cu|kernel.py --problem NAME [--arch hopper] [--language cuda|triton] [--json]`: judge one
candidate on this host's GPU (a `.py` file is a Triton candidate unless --language says otherwise).

Exit codes: 0 PASSED, 1 any other verdict, 2 bad input, 3 no GPU here (CPU stages ran), 4 infrastructure error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console

from .errors import UserError, kernel_language, one_line_errors, read_text_file
from .output import console_for

if TYPE_CHECKING:  # imported inside the command: `ptxbench --help` stays fast
    from ptxcore.arch import Architecture
    from ptxcore.judge import JudgeBackend
    from ptxcore.problems import Problem
    from ptxcore.schema import JudgeResult, Language

EXIT_VERDICT, EXIT_NO_GPU, EXIT_INFRA = 1, 3, 4


@one_line_errors
def eval_command(
    kernel: str = typer.Argument(..., help="Path of the candidate .cu (CUDA) or .py (Triton) file."),
    problem: str = typer.Option(..., "--problem", "-p", help="Definition name."),
    arch: str = typer.Option("hopper", "--arch", "-a", help="hopper | blackwell (or h100, h200, b200)."),
    workload: str = typer.Option(None, "--workload", "-w", help="Workload uuid (default: the first)."),
    language: str = typer.Option(None, "--language", "-l", help="cuda | triton (default: .py files are triton)."),
    as_json: bool = typer.Option(False, "--json", help="Print the JudgeResult envelope as JSON."),
    server: str = typer.Option(None, "--server", help="Judge through the profiling service at this URL "
                               "(token: a loopback service's per-start token file, else $PTXBENCH_PROFILER_TOKEN) "
                               "instead of this host's GPU."),
) -> None:
    """Judge a candidate: source check, compile, memcheck, correctness, timing, target instructions."""
    from ptxcore.arch import get_architecture
    from ptxcore.judge import NoGpuJudge, ServiceJudge, select_judge
    from ptxcore.judge.route import JudgeRoute, RouteError, resolve_routes
    from ptxcore.problems import get_problem
    from ptxcore.schema import EvaluationStatus

    source = read_text_file(kernel)
    lang = kernel_language(language, kernel)
    prob = get_problem(problem)
    architecture = get_architecture(arch)
    prob.workload(workload)  # unknown uuid -> one-line error
    try:
        cli = {"*": JudgeRoute.parse(server)} if server else None
        route = resolve_routes([architecture.key], cli=cli)[architecture.key]
        backend = select_judge(route, architecture.key)
    except RouteError as exc:
        raise UserError(str(exc)) from exc
    if isinstance(backend, ServiceJudge):  # one command, one verdict: let the client resubmit a lost task
        backend.client.close()
        backend = ServiceJudge(backend.url, retries=3, client_tag=f"eval:{kernel}")
    err = console_for(stderr=True)
    where = "the CPU stages (no GPU)" if isinstance(backend, NoGpuJudge) else backend.name
    with err.status(f"judging {kernel} with {where} ({prob.name})", spinner="dots"):
        result = _judge(backend, source, prob, architecture, workload, server, lang)
    _emit(result, as_json)
    if result.status is EvaluationStatus.NOT_EVALUATED:
        err.print(f"no GPU is available on this machine: ran the CPU stages only ({kernel} compiled); "
                  "correctness, timing and target-instruction execution need a GPU host", markup=False)
        raise typer.Exit(EXIT_NO_GPU)
    if result.status is EvaluationStatus.INFRA_ERROR:
        raise typer.Exit(EXIT_INFRA)
    if result.status is not EvaluationStatus.PASSED:
        raise typer.Exit(EXIT_VERDICT)


def _judge(backend: JudgeBackend, source: str, problem: Problem, arch: Architecture, workload: str | None,
           server: str | None, language: Language) -> JudgeResult:
    """The backend's verdict; a profiling service's refusal is the user's input error, its absence exit 4."""
    from ptxcore.gpu import NoGPUError
    from ptxcore.gpu.service.client import ProfilerRequestError, ProfilerUnavailable
    from ptxcore.judge import cpu_stages

    try:
        return backend.judge(source, problem, arch, workload_uuid=workload, language=language)
    except NoGPUError:  # the probe saw a GPU that the judge then could not use
        return cpu_stages(source, problem, arch, workload_uuid=workload, language=language)
    except ProfilerRequestError as exc:
        raise UserError(f"{server}: {exc.detail}") from exc
    except ProfilerUnavailable as exc:
        console_for(stderr=True).print(f"error: profiling service {server}: {exc}", markup=False)
        raise typer.Exit(EXIT_INFRA) from exc


def _emit(result: JudgeResult, as_json: bool) -> None:
    if as_json:
        typer.echo(result.model_dump_json(indent=1))
    else:
        print_summary(result, console_for())


def print_summary(r: JudgeResult, console: Console) -> None:
    color = "green" if r.status.value == "PASSED" else "yellow" if r.status.value == "NOT_EVALUATED" else "red"
    console.print(f"[bold {color}]{r.status.value}[/] {r.definition} ({r.arch})", highlight=False)
    if r.reason:
        console.print(f"  reason: {r.reason}", markup=False, highlight=False)
    if r.correctness is not None:
        c, x = r.correctness, r.correctness.stats
        detail = (f", matched {x.matched_ratio:.6f}, allclose {x.allclose}, timed calls verified "
                  f"{x.timed_calls_verified}") if x is not None else ""
        console.print(f"  correctness: max abs {c.max_absolute_error:.4g}, max rel {c.max_relative_error:.4g}{detail}",
                      markup=False, highlight=False)
    if r.performance is not None:
        p = r.performance
        console.print(f"  latency: {p.latency_ms:.4f} ms vs reference {p.reference_latency_ms:.4f} ms "
                      f"-> speedup {p.speedup_factor:.3f}x", markup=False, highlight=False)
    if r.sanitizer is not None:
        console.print(f"  memcheck: {r.sanitizer.ran} run(s), {r.sanitizer.errors} error(s)", highlight=False)
        if r.sanitizer.errors:
            console.print(r.sanitizer.report, markup=False, highlight=False)
    t = r.target_instruction
    fams = ", ".join(f"{k}={v}" for k, v in t.family_thread_inst_executed.items())
    console.print(f"  target instructions: {t.status.value} (static {t.static.value if t.static else 'n/a'})"
                  f"{'; ' + fams if fams else ''}{'; ' + t.reason if t.reason else ''}", markup=False, highlight=False)
    if t.work is not None:
        w = t.work
        share = f"{w.flops_share:.3g} of {w.problem_flops:,} FLOPs" if w.flops_share is not None else "share unknown"
        console.print(f"  target work: {w.carries.value} ({share}, threshold {w.threshold:g}): {w.reason}",
                      markup=False, highlight=False)
    if r.correctness is not None:
        for a in r.correctness.arbitrations:
            console.print(f"  arbitration (float64): {a.outcome.value}; inexact: {', '.join(a.inexact) or 'none'}; "
                          f"{a.reason}", markup=False, highlight=False)
    if r.environment.gpu_name:
        e = r.environment
        console.print(f"  environment: {e.gpu_name}, driver {e.driver_version}, CUDA {e.cuda_toolkit}, "
                      f"SM clock {_reading(e.sm_clock_mhz_before)}->{_reading(e.sm_clock_mhz_after)} MHz, "
                      f"{_reading(e.temperature_c_before)}->{_reading(e.temperature_c_after)} C"
                      f"{', throttled: ' + ','.join(e.throttle_reasons) if e.throttle_reasons else ''}",
                      markup=False, highlight=False)
    if r.stage_seconds:
        console.print("  stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in r.stage_seconds.items()),
                      markup=False, highlight=False)
    if r.log and r.status.value != "PASSED":
        console.print(r.log, markup=False, highlight=False)


def _reading(value: int | None) -> str:
    return "n/a" if value is None else str(value)
