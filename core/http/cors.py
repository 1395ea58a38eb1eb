"""CORS for the browser-facing surfaces (REST, GraphQL, llms.txt): a page on an allowed origin may call them.

The origins are the ones `core.http.admission` admits (`Allowed.origin`: one list, so an origin is either let in
and answered CORS, or refused with 403 before any route). `Cors` sits inside `Admission`, so a preflight it
answers has passed the Host and Origin rule already:

* a preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) on a path of a surface that serves
  browsers is answered **204** here with the methods, the requested headers, and `Access-Control-Max-Age`;
* any other answer on such a path to a request with an `Origin` gets `Access-Control-Allow-Origin` (that origin),
  `Vary: Origin` and the response headers a page may read (`ETag`, `Location`, `WWW-Authenticate`, ...).

No credentials mode: a page on another origin sends a bearer token, which it adds itself, never canon's session
cookie (`core.http.signin`), which only canon's own pages use. The MCP endpoint is not among the paths: it follows
the MCP specification's Origin rule alone (`Admission`).
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["METHODS", "Cors"]

METHODS = b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
EXPOSED = b"ETag, Location, Link, Retry-After, WWW-Authenticate, Content-Location"
MAX_AGE = b"600"


class Cors:
    """Answer preflights and mark answers for the paths `serves_browsers` accepts."""

    def __init__(self, app: ASGIApp, *, serves_browsers: Callable[[str], bool]) -> None:
        self.app = app
        self.serves_browsers = serves_browsers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is None or not self.serves_browsers(scope["path"]):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method") is not None:
            await self._preflight(scope, send, origin)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_allow(origin),
                                                  (b"access-control-expose-headers", EXPOSED)]}  # fmt: skip
            await send(message)

        await self.app(scope, receive, marked)

    @staticmethod
    async def _preflight(scope: Scope, send: Send, origin: str) -> None:
        requested = _header(scope, b"access-control-request-headers")
        headers = [*_allow(origin), (b"access-control-allow-methods", METHODS), (b"access-control-max-age", MAX_AGE)]
        if requested:
            headers.append((b"access-control-allow-headers", requested.encode("latin-1")))
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _allow(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None
