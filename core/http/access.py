"""The access log (`[logging] access_log = true`): one line per HTTP request or WebSocket, on `canon.access`.

A line names the client's address, the method, the route, the status, the time taken and the bytes sent. The
client is the peer, or behind a proxy of `[server] trusted_proxies` the address it forwarded (`core.http.forwarded`;
an untrusted peer's `X-Forwarded-For` is not believed). The route is the path's first segment (`/api`, `/mcp`,
`/graphql`, `/llms.txt`): the rest of a path and its query carry node ids and arguments, which a log must not hold,
so they are never logged; nor are headers (tokens, session ids).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.ops.logs import ACCESS, FIELDS

__all__ = ["AccessLog", "route_of"]

log = logging.getLogger(ACCESS)


def route_of(path: str) -> str:
    """The part of a request path the access log shows: its first segment."""
    first = path.lstrip("/").split("/", 1)[0]
    return f"/{first}"


class AccessLog:
    """Log every request that passes through, when it ends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen: dict[str, int] = {"status": 0, "bytes": 0}

        async def counting(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                seen["status"] = message["status"]
            elif kind == "http.response.body":
                seen["bytes"] += len(message.get("body", b""))
            elif kind == "websocket.accept":
                seen["status"] = 101
            elif kind == "websocket.close" and not seen["status"]:
                seen["status"] = 403
            await send(message)

        try:
            await self.app(scope, receive, counting)
        finally:
            _write(scope, seen, time.perf_counter() - started)


def _write(scope: Scope, seen: dict[str, int], seconds: float) -> None:
    method = scope.get("method", "WEBSOCKET")
    route = route_of(scope.get("path", ""))
    peer = scope.get("client")
    client = str(peer[0]) if peer else "-"
    fields: dict[str, Any] = {"event": "access", "client": client, "method": method, "route": route,
                              "status": seen["status"], "duration_ms": round(seconds * 1000, 3),
                              "bytes": seen["bytes"]}  # fmt: skip
    log.info("%s %s %s %d %.1f ms %d B", client, method, route, seen["status"], seconds * 1000, seen["bytes"],
             extra={FIELDS: fields})  # fmt: skip
