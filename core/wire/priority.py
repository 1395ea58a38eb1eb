"""The HTTP host's side of `core.priority`: every request counts as cheap work while it is served.

`CountRequests` wraps the whole app, so a request counts from the moment the app sees it (before routing, the
bearer check or reading its body) until its response is complete, or until the response turns into a stream (an
event stream, or a body sent in parts): a stream stays open for minutes and is not work. The request is
`current_request` for the code serving it, so the dispatcher can tell when it runs a walk for it: anyio and
Starlette copy the context into the worker threads they hand calls to, and the SDK's 2025-11-25 sessions run each
message's handler in the context of the request that carried it (tests/wire/test_priority.py checks both).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.priority import Priority, current_request

__all__ = ["CountRequests"]


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
        request = priority.enter()
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
