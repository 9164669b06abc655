"""ASGI middleware: Host, Origin and token checks and the request-size limit, applied before any body is parsed.

In order, on every HTTP request:
1. Host: the header must name this service (`host_allowed`): `localhost`, an IP literal, the bind address, this
   machine's host name or a configured `allowed_hosts` entry. A page that rebinds its own domain to 127.0.0.1
   (DNS rebinding) sends that domain as Host: 400, whatever the path or method.
2. Browsers: a request with an `Origin` header, or with `Sec-Fetch-Site` other than `none` (a typed URL), came
   from a web page: 403. No client of ours sends either.
3. Token: with a shared token every request must carry it; without one, every request other than GET/HEAD must
   carry the per-start token (ptxcore.gpu.service.tokenfile): 401.
4. Size: 413 for bodies over `max_bytes`, declared or streamed in chunks.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from collections.abc import Iterable

from ptxcore.gpu.service.config import TOKEN_HEADER

SAFE_METHODS = frozenset({"GET", "HEAD"})
"""Methods that change nothing (the per-start token is required for every other one)."""


async def _reply(send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def machine_names() -> set[str]:
    """This machine's own host name (a Host header an attacker's domain cannot be). Its FQDN is not looked up (a
    DNS query at every start, slow where DNS is unreachable): give it with --allowed-host."""
    name = socket.gethostname().lower()
    return {name} if name else set()


def _host_part(header: str) -> str:
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str, names: Iterable[str]) -> bool:
    """Whether a Host header names this service: `localhost`, an IP literal (no DNS answer can make a browser send
    one for another site) or one of `names` (the bind address, the machine's names, configured allowed hosts)."""
    host = _host_part(header)
    if not host:
        return False
    if host == "localhost" or host in {n.lower() for n in names}:
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class GuardMiddleware:
    """Host, browser, token and size checks (module docstring) in front of the application."""

    def __init__(self, app, token: str | None, max_bytes: int, write_token: str | None = None,
                 host_names: Iterable[str] = ()) -> None:
        self.app, self.token, self.max_bytes = app, token, max_bytes
        self.write_token = write_token or token
        self.host_names = frozenset(h.lower() for h in host_names)

    @staticmethod
    def _carries(headers: dict[bytes, bytes], token: str) -> bool:
        given = headers.get(TOKEN_HEADER.encode(), b"").decode(errors="replace")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())

    def _refusal(self, scope, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        host = headers.get(b"host", b"").decode(errors="replace")
        if not host_allowed(host, self.host_names):
            return 400, ("Host header does not name this service (reach it by localhost, an IP address or a name "
                         "in --allowed-host)")
        fetch_site = headers.get(b"sec-fetch-site", b"none").decode(errors="replace").lower()
        if b"origin" in headers or fetch_site != "none":
            return 403, "requests from web pages are refused"
        needed = self.token or (self.write_token if scope.get("method", "GET") not in SAFE_METHODS else None)
        if needed and not self._carries(headers, needed):
            return 401, "missing or wrong token (send `Authorization: Bearer <token>`)"
        return None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _reply(send, 413, f"request body over {self.max_bytes} bytes")
            return
        # Buffer the body (bounded) before the app sees it: chunked bodies are limited as well.
        chunks, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # client went away
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                await _reply(send, 413, f"request body over {self.max_bytes} bytes")
                return
            more = message.get("more_body", False)
        body, delivered = b"".join(chunks), False

        async def replay():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
