"""Serving under a path prefix (`[server] root_path`, e.g. `/kb`): a reverse proxy forwards `/kb/...` as it is.

`RootPath` is the app's outermost layer after `core.http.forwarded`: a request under the prefix goes on with the prefix
taken off its path, so every route inside (the surfaces, `/healthz`, `/metrics`, `/ui-assets/`, `/`) and every path
comparison is the same as without a prefix. The prefix goes in the scope's `app_root_path`, which Starlette's `base_url`
(links built from the request) starts with; not in `root_path`, which Starlette's router would take off the path a
second time when the inner path starts with it (`/api` served under `/api`). A request outside the prefix is answered
404, except RFC 9728's `/.well-known/oauth-protected-resource/...`, which a client asks for at the host's root whatever
the resource's path is.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from core.http.oauth import METADATA_PREFIX
from core.web.problems import send_problem

__all__ = ["RootPath"]


class RootPath:
    """Serve the app under `prefix` (`/kb`, no final slash)."""

    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path == self.prefix or path.startswith(self.prefix + "/"):
            inner = path[len(self.prefix) :] or "/"
            raw: bytes | None = scope.get("raw_path")
            scope = {**scope, "path": inner, "app_root_path": scope.get("root_path", "") + self.prefix}
            if raw is not None:
                scope["raw_path"] = raw[len(self.prefix) :] or b"/"
            await self.app(scope, receive, send)
        elif path.startswith(METADATA_PREFIX):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "not under the root path"})
        else:
            await send_problem(send, scope, 404, "no_route", f"Nothing is served at {path}; canon is served under "
                               f"{self.prefix}/.")  # fmt: skip
