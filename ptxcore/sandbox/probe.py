"""Can this policy's sandbox start here, and as whom? Probed once per policy and user with a trivial command.

As root, RunAs.AUTO runs the sandbox as nobody (so that RLIMIT_NPROC binds and file modes apply). The host paths
nobody cannot reach are staged for it (reach.py), so nobody works wherever unprivileged user namespaces do;
where the sandbox still does not start as nobody, it does not start: candidate code never runs as root.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import time

from .bwrap import INSTALL_HINT, SandboxUnavailableError, caller_is_root, find_bwrap
from .limits import effective_uid
from .models import RunAs, SandboxPolicy
from .process import Capture, SandboxProcess, make_root, pump, reported_exit

PROBE_TIMEOUT_S = 30.0


@functools.lru_cache(maxsize=64)
def _probe(policy_json: str, as_nobody: bool, bwrap: str) -> str | None:
    """None when a trivial command runs under this policy as nobody (or the caller) with this bwrap; else the
    first line of what went wrong (bwrap's complaint, the staging's, or the trampoline's)."""
    policy = SandboxPolicy.model_validate_json(policy_json)
    uid = effective_uid(as_nobody)
    try:
        root = make_root(f"{policy.name}-probe", uid)
    except (SandboxUnavailableError, OSError) as exc:
        return str(exc)
    proc = None
    try:
        proc = SandboxProcess.start(policy, root, ["/bin/sh", "-c", "exit 0"], uid=uid)
        out, err = Capture(4096), Capture(4096)
        finished = pump(proc, {proc.popen.stdout: out, proc.popen.stderr: err}, time.monotonic() + PROBE_TIMEOUT_S)
        code = reported_exit(bytes(proc.status))
    except SandboxUnavailableError as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        if proc is not None:
            proc.kill()
        shutil.rmtree(root, ignore_errors=True)
    if not finished:
        return f"a trivial command did not end within {PROBE_TIMEOUT_S:.0f} s"
    if code == 0:
        return None
    return (err.text().strip().splitlines() or [f"exit status {code}"])[0]


def resolve_run_as(policy: SandboxPolicy) -> bool:
    """True when this policy's sandbox runs as nobody (see RunAs): AUTO and NOBODY from a root caller."""
    if policy.run_as is RunAs.CALLER:
        return False
    if policy.profiling_admin and not caller_is_root():
        raise SandboxUnavailableError("profiling_admin needs a root caller")
    if policy.run_as is RunAs.NOBODY and not caller_is_root():
        raise SandboxUnavailableError("run_as=nobody needs a root caller")
    return caller_is_root()


def check_available(policy: SandboxPolicy) -> None:
    """Raise SandboxUnavailableError unless a command can run under `policy` here as the user resolve_run_as
    names (probed once per policy, user and bwrap)."""
    as_nobody = resolve_run_as(policy)
    bwrap, text = find_bwrap(), policy.model_dump_json()
    problem = _probe(text, as_nobody, bwrap)
    if problem is None:
        return
    if as_nobody and policy.run_as is RunAs.AUTO and _probe(text, False, bwrap) is None:
        raise SandboxUnavailableError(f"sandbox {policy.name} cannot run as nobody ({problem}), and candidate "
                                      "code never runs as root")
    raise SandboxUnavailableError(f"sandbox {policy.name} does not start: {problem}; {INSTALL_HINT}")
