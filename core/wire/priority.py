"""The HTTP host's side of `core.priority`: every request counts as cheap work while it is served.

`CountRequests` wraps the whole app, so a request counts from the moment the app sees it (before routing, the
bearer check or reading its body) until its response is complete, or until the response turns into a stream (an
event stream, or a body sent in parts): a stream stays open for minutes and is not work. The request is
`current_request` for the code serving it, worker threads included, so the dispatcher can tell when it runs a walk
for it; the SDK serves 2025-11-25 sessions in tasks of its own, so its tool handler takes the request from the
ASGI scope (`attached`).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.priority import Priority, Request, current_request

__all__ = ["CountRequests", "attached"]

_KEY = "canon.request"  # the scope member holding the counted request


class CountRequests:
    """Count each HTTP request to `app` as cheap work in `priority` while it is served."""

    def __init__(self, app: ASGIApp, priority: Priority) -> None:
        self.app = app
        self.priority = priority

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        priority = self.priority
        request = scope[_KEY] = priority.enter()
        token = current_request.set(request)

        async def sending(message: Message) -> None:
            if not request.finished and _streams(message):
                priority.leave(request)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            priority.leave(request)
            current_request.reset(token)


def _streams(message: Message) -> bool:
    if message["type"] == "http.response.body":
        return bool(message.get("more_body"))
    if message["type"] == "http.response.start":
        return any(
            k.lower() == b"content-type" and v.startswith(b"text/event-stream") for k, v in message.get("headers", ())
        )
    return False


@contextmanager
def attached(request: Any) -> Generator[None]:
    """Make the counted request behind `request` (a Starlette request, or None) current for the block."""
    counted: Request | None = getattr(request, "scope", {}).get(_KEY)
    if counted is None:
        yield
        return
    token = current_request.set(counted)
    try:
        yield
    finally:
        current_request.reset(token)
