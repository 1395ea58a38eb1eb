"""What the HTTP host lets in, on every route alike: the Host and Origin rule, and the request-body limit.

`Admission` sits outside every route (`/mcp`, `/healthz` and every surface: REST, GraphQL, llms.txt), so one rule
decides for all of them:

* **Host** must be one the server answers to (`Allowed.hosts`: the local names and the bind address, any port,
  plus `[server] allowed_hosts` and the host of `public_url`), else **421**. This stops DNS rebinding: a page on a
  hostile name resolved to 127.0.0.1 sends its own name.
* **Origin**, when present, must be an allowed origin (`Allowed.origins`: `http://` and the local names or the
  bind address, any port, plus `[server] allowed_origins` and the origin of `public_url`), else **403**; a request
  without one (curl, a server, a same-origin navigation) passes. The same list is the one CORS answers
  (`core.http.cors`): an origin is admitted everywhere or nowhere. WebSocket handshakes follow the same rule and
  are refused by closing them before they are accepted (the client sees a 403).
* **The body** is read here, before any route sees it, and refused with **413** once it passes
  `max_body_bytes`; a `Content-Length` over the limit is refused at once, without reading anything.

Refusals are problem documents (`core.web.problems.refuse`), on `/mcp` JSON-RPC errors without an id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.web.problems import refuse

__all__ = ["LOCAL_HOSTS", "Admission", "Allowed", "allowed_for"]

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Allowed:
    """Allowed `Host` and `Origin` values; an entry ending in `:*` matches that name on any port."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    def host(self, value: str | None) -> bool:
        return value is not None and _matches(value.lower(), self.hosts)

    def origin(self, value: str | None) -> bool:
        return value is None or _matches(value, self.origins)


def _matches(value: str, allowed: Sequence[str]) -> bool:
    for entry in allowed:
        if value == entry:
            return True
        if entry.endswith(":*") and value.startswith(entry[:-1]) and value[len(entry) - 1 :].isdigit():
            return True
    return False


def allowed_for(bind: str, *, hosts: Sequence[str] = (), origins: Sequence[str] = (),
                public_url: str | None = None) -> Allowed:  # fmt: skip
    """The local names plus the bind address, on any port, as hosts and as `http://` origins; then `hosts` (a name
    without a port matches any port), `origins` (as written) and the host and origin of `public_url`."""
    names = list(dict.fromkeys([*LOCAL_HOSTS, f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind]))
    extra_hosts = list(hosts)
    extra_origins = [origin.rstrip("/") for origin in origins]  # an Origin header never ends in "/"
    if public_url is not None:
        parts = urlsplit(public_url)
        extra_hosts.append(parts.netloc)
        extra_origins.append(f"{parts.scheme}://{parts.netloc}")
    hosts_allowed = [*(n for name in names for n in (name, f"{name}:*")), *_any_port(extra_hosts)]
    origins_allowed = [*(o for name in names for o in (f"http://{name}", f"http://{name}:*")), *extra_origins]
    return Allowed(hosts=tuple(dict.fromkeys(hosts_allowed)), origins=tuple(dict.fromkeys(origins_allowed)))


def _any_port(hosts: Sequence[str]) -> list[str]:
    """Each host as written, and a name without a port on any port too (`name:*`)."""
    out: list[str] = []
    for host in hosts:
        out.append(host.lower())
        if not host.rsplit("]", 1)[-1].count(":"):
            out.append(f"{host.lower()}:*")
    return out


class Admission:
    """Refuse a foreign Host (421) or Origin (403) and a body over `max_body` bytes (413), before any route."""

    def __init__(self, app: ASGIApp, *, allowed: Allowed, max_body: int) -> None:
        self.app = app
        self.allowed = allowed
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": refusal[1]})
            else:
                await refuse(send, scope, *refusal)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            await self._too_large(scope, send)
            return
        replay = await self._read_body(receive)
        if replay is None:
            await self._too_large(scope, send)
            return
        await self.app(scope, replay, send)

    def _refusal(self, scope: Scope) -> tuple[str, str] | None:
        host = _header(scope, b"host")
        if not self.allowed.host(host):
            return "host_not_allowed", f"This server does not answer to the Host {host!r}."
        origin = _header(scope, b"origin")
        if not self.allowed.origin(origin):
            return "origin_not_allowed", f"Requests from the Origin {origin!r} are not allowed."
        return None

    async def _read_body(self, receive: Receive) -> Receive | None:
        """Read the body (at most `max_body` bytes) and give a `receive` that hands it on; None when too large."""
        body = bytearray()
        held: deque[Message] = deque()
        complete = False
        while not complete:
            message = await receive()
            if message["type"] != "http.request":
                held.append(message)  # the client went away: the route finds out where it would have
                break
            body += message.get("body", b"")
            if len(body) > self.max_body:
                return None
            complete = not message.get("more_body", False)
        held.appendleft({"type": "http.request", "body": bytes(body), "more_body": not complete})

        async def replay() -> Message:
            return held.popleft() if held else await receive()

        return replay

    async def _too_large(self, scope: Scope, send: Send) -> None:
        await refuse(send, scope, "too_large", f"The request body is larger than {self.max_body} bytes.",
                     limit="max_body_bytes", value=self.max_body)  # fmt: skip


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None
