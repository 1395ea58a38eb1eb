"""Running the HTTP app under uvicorn, bound to a socket canon opens itself (so port 0 reports its port)."""

from __future__ import annotations

import socket
import sys

import uvicorn

from core.instance import Instance
from core.wire.http import build_app
from core.wire.mcp_server import DEFAULT_OPTIONS, ServeOptions

__all__ = ["serve_http"]


def serve_http(instance: Instance, options: ServeOptions = DEFAULT_OPTIONS) -> None:
    config = instance.config
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    sock.listen(2048)  # accept connections from the moment the address is announced
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    tokens = len(instance.tokens.entries())
    access = "callers without a token read public nodes" if config.anonymous else "every request needs a token"
    print(f"canon: serving MCP at http://{shown}:{port}/mcp (health: /healthz); {tokens} bearer token(s) in "
          f"{config.tokens}; {access}", file=sys.stderr, flush=True)  # fmt: skip
    app = build_app(instance, options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
