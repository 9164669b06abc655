"""ASGI middleware: shared-token check and request-size limit, applied before any body is parsed."""

from __future__ import annotations

import hmac
import json

from ptxcore.gpu.service.config import TOKEN_HEADER


async def _reply(send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    """401 without the token (when one is configured); 413 for bodies over `max_bytes`, whether the
    client declares the length or streams the body in chunks."""

    def __init__(self, app, token: str | None, max_bytes: int) -> None:
        self.app, self.token, self.max_bytes = app, token, max_bytes

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        if not self.token:
            return True
        given = headers.get(TOKEN_HEADER.encode(), b"").decode(errors="replace")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if not self._authorized(headers):
            await _reply(send, 401, "missing or wrong token (send `Authorization: Bearer <token>`)")
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
