"""Service settings: bind address, shared token, limits, deadlines and health thresholds.

Security rules live here so that they are checked before anything listens: loopback by default, and a
shared token for any other bind (the service refuses to start otherwise). Without a shared token the service makes
a per-start token (ptxcore.gpu.service.tokenfile) that every state-changing request must carry, and every request's
Host header must name this service (ptxcore.gpu.service.security).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from pydantic import Field, field_validator

from ptxcore.schema import FrozenModel
from ptxcore.schema.files import InputFileError, read_text

TOKEN_ENV = "PTXBENCH_PROFILER_TOKEN"
"""Environment variable holding the shared token (never a command-line argument: `ps` shows those)."""

TOKEN_HEADER = "authorization"
"""Clients send `Authorization: Bearer <token>`."""


class InsecureBindError(ValueError):
    """A non-loopback bind without a shared token, or a token too short to be a secret."""


class HealthThresholds(FrozenModel):
    """When a GPU counts as unhealthy (drained) or its worker state as stale (restarted)."""

    max_temperature_c: int = 85
    """At or above this GPU temperature the GPU is drained until it cools."""
    draining_throttle_reasons: list[str] = Field(
        default_factory=lambda: ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]
    )
    """Active clock-event reasons that drain the GPU (names as in ptxcore.gpu.service.health)."""
    min_free_bytes: int = 4 << 30
    """Below this free device memory (someone else holds it) the GPU takes no tasks."""
    max_leaked_bytes: int = 256 << 20
    """Worker allocations beyond its resident workload state, bytes; above this the worker is restarted."""
    healthy_checks_to_resume: int = 2
    """Consecutive healthy checks before a drained GPU takes tasks again."""
    recheck_s: float = 10.0
    """Seconds between health checks of a drained GPU."""
    check_timeout_s: float = 30.0
    """A health check that takes longer counts as a hung worker."""


class ServiceConfig(FrozenModel):
    """Everything `ptxbench profiler serve` needs; recorded in /health."""

    work_dir: Path
    """The only directory the service writes: task store, candidate sources, worker scratch."""
    gpus: list[int] = Field(min_length=1)
    """Physical GPU indices, one persistent worker each."""
    host: str = "127.0.0.1"
    """Bind address; anything but loopback requires `token`."""
    port: int = Field(default=8765, ge=0, le=65535)
    """TCP port (0: any free port)."""
    token: str | None = None
    """Shared secret; when set, every request must carry it. Unset: a per-start token is made and written to a
    0600 file (ptxcore.gpu.service.tokenfile), and every request that is not GET/HEAD must carry that one."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Host names clients reach the service by, besides `localhost`, IP literals, the bind address and this
    machine's own names: any other Host header is refused (a DNS-rebinding page names its own domain)."""
    archs: list[str] = Field(default_factory=lambda: ["hopper"])
    """Architecture keys this host's GPUs judge; other submissions are refused (400)."""
    runner: str = "ptxcore.gpu.service.judge_runner:JudgeRunner"
    """`module:factory` of the runner each worker process runs (server-side setting, never a request field)."""
    runner_args: dict[str, object] = Field(default_factory=dict)
    """JSON keyword arguments for the runner factory."""
    max_request_bytes: int = 4 << 20
    """Largest accepted request body, bytes (413 above)."""
    max_source_bytes: int = 512 << 10
    """Largest candidate source, bytes of UTF-8."""
    max_batch: int = 256
    """Most items in one batch submit or batch poll."""
    max_wait_s: float = 300.0
    """Longest long-poll a client may ask for, seconds."""
    default_timeout_s: float = 2700.0
    """Wall-clock limit for one task in a worker, seconds, before the worker is declared hung. A backstop
    above the judge's own stage limits (build, two memcheck runs, calls, ncu), which report candidate
    hangs themselves."""
    max_timeout_s: float = 7200.0
    """Largest per-request `timeout_s` accepted."""
    max_attempts: int = Field(default=3, ge=1)
    """Infrastructure failures are retried (elsewhere) up to this many attempts in all."""
    worker_start_timeout_s: float = 180.0
    """Seconds a new worker process may take to report ready."""
    warm_timeout_s: float = Field(default=1200.0, ge=0)
    """Seconds added to a judge worker's start for warming its baselines (ptxcore.gpu.service.warm)."""
    max_pending: int = 10_000
    """Queue bound; submits beyond it get 503 (back-pressure)."""
    prebuild_workers: int = Field(default=2, ge=0, le=64)
    """Threads that build queued CUDA candidates into the workers' compile cache while the GPU judges others
    (issue 27); 0: each worker builds its own candidate when it takes it."""
    health: HealthThresholds = Field(default_factory=HealthThresholds)
    """GPU health thresholds."""
    idle_check_s: float = 30.0
    """Health check period of an idle GPU, seconds."""
    shutdown_grace_s: float = 30.0
    """On shutdown, running attempts get this long before their workers are killed (tasks then lost)."""

    @field_validator("gpus")
    @classmethod
    def _unique(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v) or any(g < 0 for g in v):
            raise ValueError(f"GPU indices must be distinct and non-negative, got {v}")
        return v


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(config: ServiceConfig) -> None:
    """Refuse an exposed service: any non-loopback bind needs a shared token of at least 16 characters."""
    if config.token is not None and len(config.token) < 16:
        raise InsecureBindError("the shared token must be at least 16 characters")
    if not is_loopback(config.host) and not config.token:
        raise InsecureBindError(
            f"refusing to bind {config.host}: a non-loopback address requires a shared token "
            f"(set {TOKEN_ENV} or pass --token-file)"
        )


def token_from_env_or_file(token_file: str | None) -> str | None:
    """The token from a file (first line) or from $PTXBENCH_PROFILER_TOKEN; None when neither is set."""
    if token_file:
        try:
            text = read_text(token_file, 4096).strip().splitlines()
        except InputFileError as exc:
            raise ValueError(f"--token-file: {exc}") from None
        return text[0].strip() if text else None
    value = os.environ.get(TOKEN_ENV, "").strip()
    return value or None
