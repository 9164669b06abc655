"""Named evaluation profiles: how much measurement one environment step buys.

`standard` is the paper's protocol (docs/architecture.md "Evaluation protocol": 3 trials of 10 warm-ups and 50 timed
calls, 30 s a call); `quick` trades confidence in the latency for steps per second (a training loop's inner
reward), `thorough` buys more of it (final evaluation of a checkpoint). A profile sets the judge's knobs where the
judge runs in this process (route `local`, and the CPU stages of every route); a profiling service judges with its
own configuration, and every route gets the step timeout. Every verdict records the knobs it was judged with.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from ptxcore.gpu.config import JudgeConfig
from ptxcore.schema import FrozenModel


class ProfileName(StrEnum):
    """The named profiles."""

    QUICK = "quick"
    """1 trial of 3 warm-ups and 10 timed calls: a training loop's reward."""
    STANDARD = "standard"
    """The paper's protocol: 3 trials of 10 warm-ups and 50 timed calls."""
    THOROUGH = "thorough"
    """5 trials of 20 warm-ups and 100 timed calls: final evaluation."""


class EvalProfile(FrozenModel):
    """Trials, timed calls and time limits of one step's judgement."""

    name: ProfileName
    """Which profile."""
    trials: int = Field(ge=1, le=20)
    """Correctness and timing trials, each with fresh seeded inputs."""
    warmup: int = Field(ge=0, le=1000)
    """Warm-up calls per trial."""
    iters: int = Field(ge=1, le=10000)
    """Timed calls per trial."""
    call_timeout_s: float = Field(gt=0.0, le=600.0)
    """Deadline of one candidate call, seconds."""
    step_timeout_s: float = Field(gt=0.0, le=7200.0)
    """Deadline of one whole step (build, judgement, feedback), seconds: past it the step is a StepFailure."""

    def judge_config(self, base: JudgeConfig | None = None) -> JudgeConfig:
        """The judge's configuration under this profile (other knobs from `base`, default the protocol's)."""
        return (base or JudgeConfig()).model_copy(update={
            "trials": self.trials, "warmup": self.warmup, "iters": self.iters, "call_timeout_s": self.call_timeout_s})


PROFILES: dict[ProfileName, EvalProfile] = {
    ProfileName.QUICK: EvalProfile(name=ProfileName.QUICK, trials=1, warmup=3, iters=10, call_timeout_s=10.0,
                                   step_timeout_s=300.0),
    ProfileName.STANDARD: EvalProfile(name=ProfileName.STANDARD, trials=3, warmup=10, iters=50, call_timeout_s=30.0,
                                      step_timeout_s=900.0),
    ProfileName.THOROUGH: EvalProfile(name=ProfileName.THOROUGH, trials=5, warmup=20, iters=100, call_timeout_s=60.0,
                                      step_timeout_s=1800.0),
}
"""Every named profile."""


def get_profile(name: ProfileName | str) -> EvalProfile:
    """The profile of that name (ValueError naming the choices)."""
    try:
        return PROFILES[ProfileName(name)]
    except ValueError:
        raise ValueError(f"profile {str(name)[:40]!r}: one of {', '.join(p.value for p in ProfileName)}") from None
