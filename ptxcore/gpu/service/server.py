"""Running the service under uvicorn: in the foreground (the CLI) or in a background thread (tests,
benchmarks). The socket is bound here, so port 0 works and the real URL is known before serving."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from ptxcore.gpu.service.config import ServiceConfig, check_bind
from ptxcore.gpu.service.prebuild import JUDGE_RUNNER
from ptxcore.gpu.service.service import ProfilerService
from ptxcore.gpu.service.tokenfile import new_token, remove_token, write_token
from ptxcore.gpu.service.warm import check_warm
from ptxcore.gpu.service.worker import GpuWorker

log = logging.getLogger(__name__)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def _url(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_server(app, log_level: str):
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_keep_alive=30,
                            access_log=log_level == "debug")
    return uvicorn.Server(config)


FAKE_RUNNER = "ptxcore.gpu.service.fake:FakeRunner"


def parse_gpus(text: str) -> list[int]:
    """`0,1,3` -> [0, 1, 3]; ValueError naming the bad part."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--gpus: {part!r} is not a GPU index (expected e.g. 0,1)")
        out.append(int(part))
    return out


def build_config(*, gpus: str, host: str, port: int, work_dir: str, token: str | None, fake: bool = False,
                 runner_args: dict | None = None, timeout_s: float | None = None,
                 max_attempts: int | None = None, allowed_hosts: list[str] | None = None,
                 prebuild_workers: int | None = None) -> ServiceConfig:
    """The ServiceConfig for the command-line options (shared by the CLI and `python -m`)."""
    extra: dict = {}
    if timeout_s is not None:
        extra["default_timeout_s"] = timeout_s
    if max_attempts is not None:
        extra["max_attempts"] = max_attempts
    if fake:
        extra["runner"] = FAKE_RUNNER
    if allowed_hosts:
        extra["allowed_hosts"] = list(allowed_hosts)
    if prebuild_workers is not None:
        extra["prebuild_workers"] = prebuild_workers
    try:
        config = ServiceConfig(work_dir=Path(work_dir), gpus=parse_gpus(gpus), host=host, port=port, token=token,
                               runner_args=runner_args or {}, **extra)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{where}: {first['msg'].removeprefix('Value error, ')}") from None
    check_bind(config)
    if config.runner == JUDGE_RUNNER and "warm" in config.runner_args:
        check_warm(config.runner_args["warm"])
    return config


class StartToken:
    """The token state-changing requests must carry: the shared one, or a per-start one written to a 0600 file
    (ptxcore.gpu.service.tokenfile) for the port the service listens on, removed again at exit."""

    def __init__(self, config: ServiceConfig, sock: socket.socket, url: str) -> None:
        self.path: Path | None = None
        if config.token:
            self.token = config.token
            return
        self.token = new_token()
        self.path = write_token(sock.getsockname()[1], self.token, url)

    def remove(self) -> None:
        if self.path is not None:
            remove_token(self.path, self.token)


def serve(config: ServiceConfig, log_level: str = "info", on_ready: Callable[[str, Path | None], None] | None = None,
          ) -> None:
    """Serve until interrupted. Refuses an unsafe bind before anything starts. Writes
    <work_dir>/server.json ({url, pid, token_file}) once listening; `on_ready(url, token_file)`."""
    check_bind(config)
    from ptxcore.gpu.service.app import create_app

    sock = _bind(config.host, config.port)
    url = _url(sock, config.host)
    token = StartToken(config, sock, url)
    try:
        service = ProfilerService(config)
        server = _uvicorn_server(create_app(service, write_token=token.token), log_level)
        (service.workdir.root / "server.json").write_text(json.dumps(
            {"url": url, "pid": os.getpid(), "token_file": str(token.path) if token.path else None}))
        if on_ready:
            on_ready(url, token.path)
        server.run(sockets=[sock])
    finally:
        token.remove()


class BackgroundServer:
    """The service on 127.0.0.1:<free port> in a daemon thread; a context manager. `token`: what a client sends
    (ProfilerClient finds it by itself for a loopback URL)."""

    def __init__(self, config: ServiceConfig, make_worker: Callable[[int], GpuWorker] | None = None,
                 catalog=None, log_level: str = "warning") -> None:
        check_bind(config)
        from ptxcore.gpu.service.app import create_app

        self.service = ProfilerService(config, make_worker=make_worker, catalog=catalog)
        self._sock = _bind(config.host, config.port)
        self.url = _url(self._sock, config.host)
        self._token = StartToken(config, self._sock, self.url)
        self.token, self.token_file = self._token.token, self._token.path
        self._server = _uvicorn_server(create_app(self.service, write_token=self.token), log_level)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("profiling service did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(120)
        self._sock.close()
        self._token.remove()
