"""The environment's HTTP front: app.py (routes), hub.py (environments by id), server.py (uvicorn, loopback and a
per-start token by default), client.py (EnvClient, RemoteEnv). FastAPI and uvicorn load only with this package."""

from .client import EnvClient, EnvRequestError, RemoteEnv
from .hub import EnvHub
from .server import EnvServer, EnvServerConfig, InsecureEnvBind

__all__ = ["EnvClient", "EnvRequestError", "RemoteEnv", "EnvHub", "EnvServer", "EnvServerConfig", "InsecureEnvBind"]
