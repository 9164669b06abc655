"""Building environments: the prompt of the spec's variant and problem, and the judge of a route.

The route is the builder's choice (the command line, the server's start options), parsed by
`ptxcore.judge.route` and turned into a backend by `select_judge` exactly as a campaign does; the evaluation
profile sets the knobs of a judge that runs in this process.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Iterator

from ptxcore.judge import JudgeBackend, JudgeRoute, select_judge

from .env import KernelEnv, Prompt, StepRecorder
from .judging import JudgeEvaluator, SlotGate
from .profiles import get_profile
from .spec import EnvSpec


class EnvSpecError(ValueError):
    """A spec this installation cannot serve (unknown problem or variant, a variant of another architecture)."""


def spec_prompt(spec: EnvSpec) -> Prompt:
    """The first messages of the spec's (variant, problem); EnvSpecError naming what is unknown."""
    return _prompt(spec.prompt_variant, spec.problem, spec.arch)


@functools.lru_cache(maxsize=256)
def _prompt(variant: str, problem: str, arch: str) -> Prompt:
    from ptxcore.problems import ProblemNotFoundError, get_problem
    from ptxcore.prompts import assemble_prompt, load_variant

    try:
        chosen = load_variant(variant)
        definition = get_problem(problem)
    except (KeyError, ValueError, ProblemNotFoundError) as exc:
        raise EnvSpecError(str(exc).strip("'\"")) from None
    if chosen.arch != arch:
        raise EnvSpecError(f"prompt_variant {variant} is written for {chosen.arch}, not {arch}")
    p = assemble_prompt(chosen, definition)
    return Prompt(system=p.system, user=p.user, sha256=p.sha256)


def spec_judge(spec: EnvSpec, route: str = "auto", recorded: str | None = None) -> JudgeBackend:
    """The backend of `route` for the spec's architecture, configured by its profile (RouteError when the route
    cannot be served here)."""
    config = get_profile(spec.profile).judge_config()
    return select_judge(JudgeRoute.parse(route), spec.arch, config, recorded=recorded)


class EnvBuilder:
    """Hands out the environments of one run: one judge per (architecture, profile), one episode counter (their
    trajectory ids never collide)."""

    def __init__(self, route: str = "auto", recorded: str | None = None, recorder: StepRecorder | None = None,
                 first_episode: int = 0, gpu_slots: dict[str, int] | None = None) -> None:
        self.route, self.recorded, self.recorder = route, recorded, recorder
        self.slots = SlotGate(gpu_slots)
        self._backends: dict[tuple[str, str], JudgeBackend] = {}
        self._lock = threading.Lock()
        self.episodes: Iterator[int] = itertools.count(first_episode)

    def backend(self, spec: EnvSpec) -> JudgeBackend:
        key = (spec.arch, spec.profile.value)
        with self._lock:  # environments are made from request threads (the HTTP front)
            if key not in self._backends:
                self._backends[key] = spec_judge(spec, self.route, self.recorded)
            return self._backends[key]

    def make(self, spec: EnvSpec) -> KernelEnv:
        """An environment of `spec` judged by this run's backend, recorded by its recorder."""
        evaluator = JudgeEvaluator(self.backend(spec), spec.language, self.slots.gate(spec.arch))
        return KernelEnv(spec, evaluator, spec_prompt(spec), recorder=self.recorder, episodes=self.episodes)


def make_env(spec: EnvSpec, route: str = "auto", recorded: str | None = None,
             recorder: StepRecorder | None = None) -> KernelEnv:
    """One environment with its own judge (an EnvBuilder makes many that share one)."""
    return EnvBuilder(route, recorded, recorder).make(spec)
