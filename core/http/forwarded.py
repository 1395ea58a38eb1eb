"""Believing a reverse proxy: `X-Forwarded-For`, `-Proto` and `-Host`, only from the peers `[server] trusted_proxies`
names.

Behind a proxy every request comes from the proxy's address, with the scheme and host the proxy used to reach
canon; the proxy says what the client used in these headers. Anyone can send them, so `TrustedProxies` believes
them only when the peer is one of the configured addresses or networks, and then sets what the rest of the app
reads: the client address (`scope["client"]`: the access log), the scheme (`scope["scheme"]`: links and the
landing page's URL) and the `Host` header (the Host rule of `core.http.admission`, links). From any other peer the
headers are left as they are and mean nothing. `X-Forwarded-For` lists each hop; the client is the last address
that is not a trusted proxy, so a client cannot put a made-up address in front of the list.

uvicorn's own `proxy_headers` is off (`core.http.serve`): it trusts 127.0.0.1 by default, whatever is configured.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["TrustedProxies"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """Take the client's address, scheme and host from a trusted proxy's `X-Forwarded-*` headers."""

    def __init__(self, app: ASGIApp, *, proxies: Sequence[str]) -> None:
        self.app = app
        self.networks: tuple[Network, ...] = tuple(ipaddress.ip_network(p, strict=False) for p in proxies)

    def trusts(self, address: str | None) -> bool:
        if not address:
            return False
        try:
            ip = ipaddress.ip_address(address.strip("[]"))
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] in ("http", "websocket") and self.networks and client and self.trusts(client[0]):
            self._believe(scope)
        await self.app(scope, receive, send)

    def _believe(self, scope: Scope) -> None:
        headers: list[tuple[bytes, bytes]] = list(scope["headers"])
        seen = {k.lower(): bytes(v).decode("latin-1").strip() for k, v in headers}
        hops = [h.strip() for name, v in headers if name.lower() == b"x-forwarded-for"
                for h in bytes(v).decode("latin-1").split(",") if h.strip()]  # fmt: skip
        if hops:
            scope["client"] = (self._client_of(hops), 0)
        proto = seen.get(b"x-forwarded-proto", "").split(",")[0].strip().lower()
        if proto in ("http", "https"):
            scope["scheme"] = proto.replace("http", "ws") if scope["type"] == "websocket" else proto
        host = seen.get(b"x-forwarded-host", "").split(",")[0].strip()
        if host:
            scope["headers"] = [(k, v) for k, v in headers if k.lower() != b"host"] + [(b"host", host.encode())]

    def _client_of(self, hops: list[str]) -> str:
        """The nearest hop that is not a trusted proxy (the first hop, when every one is)."""
        for hop in reversed(hops):
            address = _address_of(hop)
            if not self.trusts(address):
                return address
        return _address_of(hops[0])


def _address_of(hop: str) -> str:
    """An `X-Forwarded-For` entry without a port: `1.2.3.4:5678` and `[::1]:5678` name 1.2.3.4 and ::1."""
    if hop.startswith("["):
        return hop[1:].split("]", 1)[0]
    if hop.count(":") == 1:
        return hop.split(":", 1)[0]
    return hop
