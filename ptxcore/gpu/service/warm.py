"""What a judge worker prepares before it reports ready (issue 27, item 4): the workload state and the reference
latency of the problems named, so that a baseline's first call (FlashInfer's JIT rebuild of its modules inside the
reference's `plan()`: 100-230 s on a fresh GPU host) happens at the service's start and never inside a
candidate's judgement or against its deadline.

`auto` (the default) names every problem whose baseline is FlashInfer, when FlashInfer is installed; a list
names problems; an empty list warms nothing. A problem that cannot be warmed is logged and left to its first
judgement, as without warming.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from ptxcore.problems import Problem, ProblemNotFoundError, get_problem, load_catalog

log = logging.getLogger(__name__)

AUTO = "auto"


def problems_to_warm(spec: str | Sequence[str], installed: Callable[[Problem], bool] | None = None) -> list[Problem]:
    """The problems `spec` names (ProblemNotFoundError for an unknown one)."""
    if isinstance(spec, str):
        if spec != AUTO:
            raise ValueError(f"warm must be {AUTO!r} or a list of problem names, not {spec!r}")
        has = installed or _baseline_installed
        return [p for p in load_catalog().values() if p.extension.baseline.library.value == "flashinfer" and has(p)]
    return [get_problem(name) for name in spec]


def _baseline_installed(problem: Problem) -> bool:
    from ptxcore.gpu.harness.baselines import baseline_version

    return baseline_version(problem)[1] is not None


def warm(problems: list[Problem], prepare: Callable[[Problem], object]) -> dict[str, float | None]:
    """`prepare` each problem (the judge's workload state and reference); seconds each took, None where it failed."""
    took: dict[str, float | None] = {}
    for problem in problems:
        t0 = time.monotonic()
        try:
            prepare(problem)
            took[problem.name] = round(time.monotonic() - t0, 3)
            log.info("warmed %s in %.1f s", problem.name, took[problem.name])
        except Exception as exc:  # its first judgement prepares it, as without warming
            took[problem.name] = None
            log.warning("could not warm %s (its first judgement will): %s", problem.name, exc)
    return took


def check_warm(spec: object) -> None:
    """ValueError (one line) unless `spec` is `auto` or a list of known problem names: checked when the service is
    configured, so a typo is refused at the command line, not by workers that die at every start."""
    if isinstance(spec, str):
        problems_to_warm(spec, installed=lambda problem: False)
        return
    if not isinstance(spec, list) or not all(isinstance(n, str) for n in spec):
        raise ValueError(f"runner_args.warm must be {AUTO!r} or a list of problem names")
    try:
        problems_to_warm(spec)
    except ProblemNotFoundError as exc:
        raise ValueError(f"runner_args.warm: {exc.args[0] if exc.args else exc}") from None
