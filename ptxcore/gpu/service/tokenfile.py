"""The per-start token of a loopback profiling service, in a file only this user can read.

A service started without a shared token (`--token-file`, $PTXBENCH_PROFILER_TOKEN) makes a random one at every
start and writes it to `<token dir>/<port>.json` (the directory 0700, the file 0600, neither through a link):
every request that changes state must carry it, loopback included, so a web page in the user's browser (DNS
rebinding) or another user of the machine cannot submit work or drain the GPUs. The client, the CLI and the
Prefect worker read it for a loopback URL of that port; the file names the service's pid, so a file left by a
service that died is not used. Light (the client imports it).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path
from urllib.parse import urlsplit

from ptxcore.gpu.service.config import is_loopback

TOKEN_DIR_ENV = "PTXBENCH_PROFILER_TOKEN_DIR"
"""Directory of the per-start token files (default ~/.ptxbench/profiler-tokens)."""
MAX_TOKEN_FILE_BYTES = 4096


class TokenFileError(RuntimeError):
    """The token directory or file is not private to this user (one line)."""


def token_dir() -> Path:
    return Path(os.environ.get(TOKEN_DIR_ENV) or Path.home() / ".ptxbench" / "profiler-tokens")


def token_path(port: int) -> Path:
    return token_dir() / f"{int(port)}.json"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise TokenFileError(f"{path}: not a directory of this user (refusing to write the service token there)")
    os.chmod(path, 0o700)


def write_token(port: int, token: str, url: str) -> Path:
    """Write the token of the service listening on `port` (0600, replacing an earlier file by rename)."""
    path = token_path(port)
    try:
        _private_dir(path.parent)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"url": url, "pid": os.getpid(), "token": token}, fh)
        os.replace(tmp, path)
    except OSError as exc:
        raise TokenFileError(f"cannot write the service's start token to {path.parent}: {exc.strerror} (set "
                             f"${TOKEN_DIR_ENV} to a private directory)") from None
    return path


def remove_token(path: Path, token: str) -> None:
    """Remove the file if it still holds `token` (a later service on the port may have replaced it)."""
    if _read(path).get("token") == token:
        path.unlink(missing_ok=True)


def _read(path: Path) -> dict:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            return {}  # not ours, or readable by others: never trusted
        data = json.loads(os.read(fd, MAX_TOKEN_FILE_BYTES) or b"{}")
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else {}


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_loopback_url(url: str) -> bool:
    return is_loopback(urlsplit(url).hostname or "")


def local_token(url: str) -> str | None:
    """The per-start token of the live loopback service at `url` (None for any other URL, or none found)."""
    if not is_loopback_url(url):
        return None
    try:
        port = urlsplit(url).port or (443 if url.startswith("https") else 80)
    except ValueError:
        return None
    data = _read(token_path(port))
    token = data.get("token")
    return token if isinstance(token, str) and token and _alive(data.get("pid")) else None
