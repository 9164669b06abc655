"""Process-local state of a running campaign, looked up by key from tasks and subflows.

Flow parameters go to the Prefect API as JSON, so subflows receive a plan (a pydantic model) and this
key rather than live objects such as the writer or the model clients.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ptxcore.agent import CampaignConfig, TrajectoryPlan
from ptxcore.agent.types import FeedbackAugmenter, LLMClient
from ptxcore.judge import JudgeBackend
from ptxcore.schema import TrajectoryRecord, TurnRecord

from .writer import RecordWriter


@dataclass(frozen=True)
class Prompt:
    """The assembled messages of one (variant, problem)."""

    system: str
    user: str
    sha256: str


PromptBuilder = Callable[[TrajectoryPlan], Prompt]


def assembled_prompt(plan: TrajectoryPlan) -> Prompt:
    """The prompts package's assembly for the plan's variant and problem (cached)."""
    return _assembled(plan.prompt_variant, plan.problem)


@functools.lru_cache(maxsize=256)
def _assembled(variant: str, problem: str) -> Prompt:
    from ptxcore.problems import get_problem
    from ptxcore.prompts import assemble_prompt, load_variant

    p = assemble_prompt(load_variant(variant), get_problem(problem))
    return Prompt(system=p.system, user=p.user, sha256=p.sha256)


@dataclass
class CampaignRuntime:
    """Everything a trajectory of the campaign needs that is not a plain value."""

    config: CampaignConfig
    writer: RecordWriter
    clients: dict[str, LLMClient]
    """Model clients by model name (label)."""
    judges: dict[str, JudgeBackend]
    """Judge backends by architecture key."""
    recorded: dict[str, list[TurnRecord]] = field(default_factory=dict)
    """Turns recorded before this run, by trajectory id (resume)."""
    trajectories: dict[str, TrajectoryRecord] = field(default_factory=dict)
    """Trajectory records written before this run, by trajectory id."""
    prompt_builder: PromptBuilder = assembled_prompt
    """How a plan's system and user messages are built."""
    augmenter: FeedbackAugmenter | None = None
    """Repair retrieval added to failing turns' feedback (the campaign's `repair_retrieval`), if any."""


_RUNTIMES: dict[str, CampaignRuntime] = {}
_LOCK = threading.Lock()


def register_runtime(key: str, runtime: CampaignRuntime) -> None:
    with _LOCK:
        if key in _RUNTIMES:
            raise RuntimeError(f"campaign {key!r} is already running in this process")
        _RUNTIMES[key] = runtime


def unregister_runtime(key: str) -> None:
    with _LOCK:
        _RUNTIMES.pop(key, None)


def get_runtime(key: str) -> CampaignRuntime:
    with _LOCK:
        if key not in _RUNTIMES:
            raise RuntimeError(f"campaign {key!r} is not running in this process")
        return _RUNTIMES[key]


# -- the temporary Prefect server of `ptxbench campaign run` -------------------------------------------------
PR_SET_PDEATHSIG = 1
"""linux/prctl.h: deliver a signal to this process when the thread that forked it exits."""
SERVER_START_TIMEOUT_S = 180
"""Prefect's own default (20 s) is too short on a loaded 2-core machine, where a first start migrates the DB."""


class TemporaryServerError(RuntimeError):
    """Prefect's temporary server did not come up (one line)."""


def _die_with_parent(parent_pid: int) -> Callable[[], None] | None:
    """A preexec_fn that makes the child receive SIGKILL when this process dies (Linux), or None elsewhere.

    SIGKILL rather than SIGTERM: nobody is left to escalate if a graceful shutdown stalls, and the server's
    sqlite database is crash-safe. libc is resolved here, before the fork, so the child only makes two calls.
    """
    import ctypes
    import os
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died between fork and prctl
            os._exit(1)

    return preexec


class _PopenWithPreexec:
    """Stands in for the `subprocess` module inside prefect.server.api.server while the server is spawned."""

    def __init__(self, preexec: Callable[[], None]) -> None:
        self._preexec = preexec

    def __getattr__(self, name: str) -> object:
        import subprocess

        return getattr(subprocess, name)

    def Popen(self, *args: object, **kwargs: object):  # noqa: N802 - the name it replaces
        import subprocess

        kwargs.setdefault("preexec_fn", self._preexec)
        return subprocess.Popen(*args, **kwargs)  # type: ignore[call-overload]


def _bound_server_class():
    import os
    from unittest import mock

    from prefect.server.api import server as prefect_server

    class BoundServer(prefect_server.SubprocessASGIServer):
        """Prefect's SubprocessASGIServer, whose uvicorn process dies with the process that started it.

        Prefect stops its temporary server from an atexit hook only, which SIGKILL and an unhandled SIGTERM
        skip; the kernel's parent-death signal covers every way this process can end. Only the spawn is
        changed (`preexec_fn`); command line, environment, port choice and health wait stay Prefect's.
        """

        _instances: dict = {}  # not Prefect's registry: the default slot is set explicitly below

        def _run_uvicorn_command(self):  # type: ignore[no-untyped-def]
            preexec = _die_with_parent(os.getpid())
            if preexec is None:
                return super()._run_uvicorn_command()
            with mock.patch.object(prefect_server, "subprocess", _PopenWithPreexec(preexec)):
                return super()._run_uvicorn_command()

    return prefect_server.SubprocessASGIServer, BoundServer


def start_temporary_prefect_server(timeout_s: int = SERVER_START_TIMEOUT_S) -> str | None:
    """Start Prefect's temporary server now, bound to this process's life; returns its API URL.

    None when a server is configured (PREFECT_API_URL) or ephemeral servers are off, or one already runs. Call
    it from the main thread: the parent-death signal follows the thread that forks the server.
    """
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return None
    base, bound = _bound_server_class()
    current = base._instances.get(None)
    if current is not None and current.running:
        return None
    server = bound()
    base._instances[None] = server  # what Prefect's get_client() finds (as prefect_test_harness does it)
    try:
        server.start(timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - Prefect raises RuntimeError/HTTP errors with long bodies
        base._instances.pop(None, None)
        server.stop()
        raise TemporaryServerError(
            f"Prefect's temporary server did not start within {timeout_s} s ({str(exc).splitlines()[0][:200]}); "
            "set PREFECT_API_URL to a running `prefect server start`") from exc
    return server.api_url


EXIT_GRACE_S = 20.0
"""How long `campaign run` may take to wind down after SIGINT/SIGTERM before it exits regardless."""


def arm_exit_watchdog(grace_s: float = EXIT_GRACE_S) -> bool:
    """Make SIGINT and SIGTERM end this process within `grace_s`, whoever handles them.

    Prefect swaps in its own SIGTERM handler while a flow runs and unwinds through its task runner, whose
    shutdown waits for running task threads (a judge call may take minutes), so a signalled campaign could
    linger long after the user asked it to stop. The watchdog does not replace any handler: it reads the
    interpreter's signal wake-up fd (written for every signal that reaches a Python handler), and once
    SIGINT or SIGTERM has arrived it waits `grace_s` for the normal shutdown, then exits with 128 + the
    signal. What the campaign wrote is committed turn by turn, so rerunning the command resumes; the
    temporary Prefect server dies with the process (parent-death signal). Main thread only; False when it
    could not be armed (not the main thread, or a wake-up fd is already in use).
    """
    import os
    import signal
    import sys
    import time

    if threading.current_thread() is not threading.main_thread():
        return False
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    if previous != -1:  # someone else's (an event loop's): leave it in place
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return False
    stopping = {int(signal.SIGINT), int(signal.SIGTERM)}

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            hit = next((sig for sig in data if sig in stopping), None)
            if hit is not None:
                time.sleep(grace_s)
                sys.stderr.write(f"\nstill shutting down {grace_s:.0f} s after {signal.Signals(hit).name}: exiting "
                                 "now (rerun the same command to resume)\n")
                sys.stderr.flush()
                os._exit(128 + hit)

    threading.Thread(target=watch, name="ptxbench-exit-watchdog", daemon=True).start()
    return True
