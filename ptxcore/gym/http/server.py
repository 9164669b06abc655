"""Running the environment's HTTP front under uvicorn: loopback and a per-start token by default.

The same rules as the profiling service (ptxcore.gpu.service.server): a non-loopback bind needs a shared token of
at least 16 characters; without one, a random token is made at every start and written to the user's private token
directory (ptxcore.gpu.service.tokenfile, by port), where EnvClient finds it for a loopback URL.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

from pydantic import Field

from ptxcore.gpu.service.config import is_loopback
from ptxcore.gpu.service.tokenfile import new_token, remove_token, write_token
from ptxcore.schema import FrozenModel

from .app import create_env_app
from .hub import EnvHub

log = logging.getLogger(__name__)
DEFAULT_PORT = 8790


class InsecureEnvBind(ValueError):
    """A non-loopback bind without a shared token, or a token too short to be a secret."""


class EnvServerConfig(FrozenModel):
    """Where the front listens and who may use it."""

    host: str = Field(default="127.0.0.1", min_length=1, max_length=255)
    """Bind address (loopback by default)."""
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    """Port (0: any free one)."""
    token: str | None = Field(default=None, max_length=512)
    """Shared token every request must carry; None: a per-start token guards every state-changing request."""
    allowed_hosts: list[str] = Field(default_factory=list, max_length=32)
    """Host names (besides localhost, IP literals, the bind address and this machine's name) requests may use."""

    def check(self) -> None:
        if self.token is not None and len(self.token) < 16:
            raise InsecureEnvBind("the shared token must be at least 16 characters")
        if not is_loopback(self.host) and not self.token:
            raise InsecureEnvBind(f"refusing to bind {self.host}: a non-loopback address requires a shared token")


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.set_inheritable(False)
    return sock


class EnvServer:
    """The front over `hub`, bound at construction (so port 0 works and `url` is known); `run()` serves in this
    thread, `start()` in a daemon thread; `stop()` ends it and removes the per-start token file."""

    def __init__(self, hub: EnvHub, config: EnvServerConfig, log_level: str = "warning") -> None:
        import uvicorn

        config.check()
        self.hub, self.config = hub, config
        self._sock = _bind(config.host, config.port)
        port = self._sock.getsockname()[1]
        self.url = f"http://[{config.host}]:{port}" if ":" in config.host else f"http://{config.host}:{port}"
        self.token = config.token or new_token()
        self.token_file: Path | None = None if config.token else write_token(port, self.token, self.url)
        names = (*config.allowed_hosts, socket.gethostname().lower(), config.host)
        app = create_env_app(hub, write_token=self.token, token=config.token, host_names=names)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="off", timeout_keep_alive=30))
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self._cleanup()

    def start(self) -> EnvServer:
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the environment server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(60)
        self._cleanup()

    def _cleanup(self) -> None:
        self._sock.close()
        self.hub.shutdown()
        if self.token_file is not None:
            remove_token(self.token_file, self.token)
            self.token_file = None

    def __enter__(self) -> EnvServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
