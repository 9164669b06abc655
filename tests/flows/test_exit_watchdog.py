"""`campaign run`'s exit watchdog: after SIGINT/SIGTERM the process ends within the grace period even when a
handler swallows the signal or the shutdown waits on a busy thread (Prefect's task runner does)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

CHILD = """
import os, signal, sys, threading, time
sys.path.insert(0, {repo!r})
from flows.runtime import arm_exit_watchdog
assert arm_exit_watchdog(grace_s=1.0)
signal.signal(signal.SIGTERM, lambda *a: None)   # a handler that swallows it (as a flow engine might)
threading.Thread(target=time.sleep, args=(60,)).start()  # a non-daemon worker the shutdown would wait for
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signalled_process_exits_after_the_grace_period(sig, repo_root):
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(repo=str(repo_root))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
    assert code == 128 + sig and time.monotonic() - started < 15
    assert "exiting now (rerun the same command to resume)" in proc.stderr.read()


def test_only_the_main_thread_arms_it():
    import threading

    from flows.runtime import arm_exit_watchdog

    out = []
    t = threading.Thread(target=lambda: out.append(arm_exit_watchdog(1.0)))
    t.start()
    t.join()
    assert out == [False]
