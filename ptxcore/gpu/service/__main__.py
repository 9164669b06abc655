"""`python -m ptxcore.gpu.service --gpus 0,1 [--host H] [--port N] [--work-dir D]`: the service without
the `ptxbench` CLI (for GPU hosts that carry only ptxcore). Same options as `ptxbench profiler serve`."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from ptxcore.gpu.service.config import InsecureBindError, token_from_env_or_file
from ptxcore.gpu.service.server import build_config, serve
from ptxcore.gpu.service.tokenfile import TokenFileError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ptxcore.gpu.service", description=__doc__)
    ap.add_argument("--gpus", required=True, help="comma-separated GPU indices, e.g. 0,1")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--work-dir", default=".ptxbench/profiler")
    ap.add_argument("--token-file", default=None)
    ap.add_argument("--allowed-host", action="append", default=[], help="a host name clients use (repeatable)")
    ap.add_argument("--fake", action="store_true", help="FakeRunner instead of the judge (tests; no GPU work)")
    ap.add_argument("--runner-args", default="{}", help="JSON keyword arguments for the runner")
    ap.add_argument("--timeout-s", type=float, default=None)
    ap.add_argument("--max-attempts", type=int, default=None)
    ap.add_argument("--prebuild-workers", type=int, default=None,
                    help="threads building queued CUDA candidates ahead of their GPU (0: none; default 2)")
    ap.add_argument("--log-level", default="info")
    a = ap.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = build_config(gpus=a.gpus, host=a.host, port=a.port, work_dir=a.work_dir,
                              token=token_from_env_or_file(a.token_file), fake=a.fake,
                              runner_args=json.loads(a.runner_args), timeout_s=a.timeout_s,
                              max_attempts=a.max_attempts, allowed_hosts=a.allowed_host,
                              prebuild_workers=a.prebuild_workers)
        serve(config, log_level=a.log_level, on_ready=lambda url, token_file: logging.getLogger(__name__).info(
            "serving %s%s", url, f" (per-start token in {token_file})" if token_file else ""))
    except (InsecureBindError, ValueError, OSError, TokenFileError) as exc:
        sys.stderr.write(f"error: {str(exc).splitlines()[0]}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
