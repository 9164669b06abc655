"""Entry point of one persistent GPU worker process (`python -m ptxcore.gpu.service.worker_main`).

Protocol: length-prefixed JSON messages over two inherited pipe fds (never stdout, which candidate and
tool output may use; stdout and stderr go to the worker's log file).
  service -> worker: {"op": "run", "item": WorkItem} | {"op": "health"} | {"op": "shutdown"}
  worker -> service: {"type": "ready", "pid"} | {"type": "phase", "phase"} | {"type": "result", "result"}
                     | {"type": "engine_error", "error"} | {"type": "health", "health"}
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

log = logging.getLogger("ptxcore.gpu.service.worker")


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the service process dies (no orphaned workers)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _send(conn: Connection, message: dict) -> None:
    conn.send_bytes(json.dumps(message).encode())


def _serve(runner, commands: Connection, replies: Connection) -> None:
    from ptxcore.gpu.service.models import WorkItem
    from ptxcore.gpu.service.runner import Phase

    while True:
        try:
            message = json.loads(commands.recv_bytes())
        except (EOFError, OSError):
            return  # the service went away
        op = message.get("op")
        if op == "shutdown":
            return
        if op == "health":
            _send(replies, {"type": "health", "health": runner.health().model_dump(mode="json")})
            continue
        if op != "run":
            _send(replies, {"type": "engine_error", "error": f"unknown op {op!r}"})
            continue
        item = WorkItem.model_validate(message["item"])

        def phase(p: Phase) -> None:
            _send(replies, {"type": "phase", "phase": Phase(p).value})

        try:
            result = runner.run(item, phase)
        except Exception as exc:  # infrastructure: reported, the service replaces this worker
            tb = traceback.format_exc(limit=8)
            log.error("runner failed on %s: %s\n%s", item.task_id, exc, tb)
            _send(replies, {"type": "engine_error", "error": f"{type(exc).__name__}: {exc}"[:2000]})
            continue
        _send(replies, {"type": "result", "result": result.model_dump(mode="json")})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", type=int, required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--runner-args", default="{}")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--cmd-fd", type=int, required=True)
    ap.add_argument("--reply-fd", type=int, required=True)
    args = ap.parse_args(argv)
    _die_with_parent()
    logging.basicConfig(level=os.environ.get("PTXBENCH_LOG", "INFO").upper(), stream=sys.stderr,
                        format=f"%(asctime)s gpu{args.gpu} %(name)s %(levelname)s %(message)s")
    commands = Connection(args.cmd_fd, readable=True, writable=False)
    replies = Connection(args.reply_fd, readable=False, writable=True)
    from ptxcore.gpu.service.runner import make_runner

    runner = make_runner(args.runner, args.gpu, Path(args.work_dir), json.loads(args.runner_args))
    warm_up = getattr(runner, "warm_up", None)  # the judge's baselines before any candidate (service.warm)
    if warm_up is not None:
        warm_up()
    _send(replies, {"type": "ready", "pid": os.getpid()})
    try:
        _serve(runner, commands, replies)
    finally:
        runner.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
