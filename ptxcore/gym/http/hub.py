"""The server's environments: created on request, looked up by id, judged by the run's one builder and pool."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Sequence

from pydantic import ValidationError

from ..batch import EnvPool, StepOutcome
from ..build import EnvBuilder
from ..env import KernelEnv
from ..profiles import get_profile
from ..reward import DEFAULT_REWARD, RewardSpec
from ..spec import EnvSpec
from .models import EnvCreate

log = logging.getLogger(__name__)


class UnknownEnv(LookupError):
    """No environment of that id (never created, or closed)."""


class TooManyEnvs(RuntimeError):
    """The server holds its limit of environments."""


class EnvHub:
    """Environments of one run (campaign id `run_id`), at most `max_envs` open."""

    def __init__(self, builder: EnvBuilder, run_id: str = "env-serve", reward: RewardSpec = DEFAULT_REWARD,
                 max_envs: int = 256, max_in_flight: int = 16) -> None:
        self.builder, self.run_id, self.reward, self.max_envs = builder, run_id, reward, max_envs
        self.pool = EnvPool(max_in_flight=max_in_flight)
        self._envs: dict[str, KernelEnv] = {}
        self._lock = threading.Lock()

    def create(self, request: EnvCreate) -> tuple[str, KernelEnv]:
        """A new environment (EnvSpecError for an unknown problem or variant, TooManyEnvs at the limit)."""
        fields = request.model_dump()
        fields["reward"] = request.reward or self.reward
        try:
            spec = EnvSpec.model_validate({**fields, "run_id": self.run_id})
        except ValidationError as exc:  # the field and the rule, never the value
            first = exc.errors()[0]
            raise ValueError(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
        env = self.builder.make(spec)  # the prompt is assembled here: an unknown variant fails before any id
        with self._lock:
            if len(self._envs) >= self.max_envs:
                raise TooManyEnvs(f"{self.max_envs} environments are open: close one first")
            env_id = secrets.token_hex(16)
            self._envs[env_id] = env
        log.info("environment %s: %s / %s / %s", env_id[:8], spec.problem, spec.arch, spec.prompt_variant)
        return env_id, env

    def get(self, env_id: str) -> KernelEnv:
        with self._lock:
            env = self._envs.get(env_id)
        if env is None:
            raise UnknownEnv("no such environment")
        return env

    def close(self, env_id: str) -> None:
        with self._lock:
            if self._envs.pop(env_id, None) is None:
                raise UnknownEnv("no such environment")

    def count(self) -> int:
        with self._lock:
            return len(self._envs)

    def step_many(self, items: Sequence[tuple[str, str]], timeout_s: float | None) -> list[StepOutcome]:
        """Steps of several environments at once (UnknownEnv before any runs when an id is unknown)."""
        steps = [(self.get(env_id), completion) for env_id, completion in items]
        limit = timeout_s if timeout_s is not None else min(get_profile(e.spec.profile).step_timeout_s
                                                            for e, _ in steps)
        return self.pool.step_many(steps, limit)

    def shutdown(self) -> None:
        self.pool.close()
