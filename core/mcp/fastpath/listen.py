"""2026-07-28 `subscriptions/listen` over HTTP, served by canon rather than the SDK (ADR 0013).

A listen request's response IS an SSE stream: an acknowledgement, then change notifications, each stamped with
`_meta["io.modelcontextprotocol/subscriptionId"]` = the request's JSON-RPC id. The SDK builds, serialises and
hands over a notification per stream (about 0.2 ms of CPU per stream per event) and caps a process at 1,024
streams; canon's streams (`core.mcp.fastpath.listen_streams`) encode each event once.

`ListenRoute` sits in front of the SDK's `/mcp` app, inside `BearerGate`. It takes a request only when the SDK
would have served it as a listen stream: a POST with `Mcp-Method: subscriptions/listen` and a 2026-07-28
`MCP-Protocol-Version` whose body passes every check the SDK's transport and runner make (body size,
Host/Origin, content type, Accept, JSON-RPC shape, routing headers, the `_meta` envelope, params), made with the
SDK's own functions. Anything else goes to the SDK untouched, its body replayed, so the SDK answers errors
exactly as before. A request taken is served as `_HonestListen` over the SDK's `ListenHandler` served it
(`core.mcp.server`):

* resource URIs the caller may not read are dropped (each checked through the dispatcher, audited); prompts are
  never acknowledged (canon has none);
* the acknowledgement is the first frame, then every matching event in order, as `event: message` frames;
* at `max_streams` open streams a new one is refused with `-32603 "Subscription limit reached"`, as the SDK
  refuses it;
* a client that disconnects ends its stream; a stream idle for `keepalive_s` gets a `: ping` comment.

Upstream limitation: the SDK builds and encodes every notification once per listening stream (no one-encode
fan-out) and caps a process at 1,024 listen streams. Delete this module, `listen_streams.py` and `ListenRoute` in
the app when the SDK encodes an event once for all its streams and its cap can be set
(`benchmarks/fanout_bench`: 1,000 listeners p99 within this path's). Private SDK state: none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp_types import (
    INTERNAL_ERROR,
    ErrorData,
    RequestId,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
)
from starlette.types import ASGIApp, Receive, Scope, Send

from core.dispatch.dispatcher import Dispatcher
from core.dispatch.resources import read_resource
from core.mcp.fastpath.listen_streams import LISTEN, ListenStreams, Stream
from core.mcp.fastpath.takeover import json_error, may_be, read_body, recognise
from core.seam.snapshot import Snapshot
from core.seam.surfaces import principal_of_scope
from core.values.errors import CanonError
from core.values.principal import Principal

__all__ = ["ListenRoute", "readable_uris"]

log = logging.getLogger("canon.listen")


def readable_uris(dispatcher: Dispatcher, principal: Principal, surface: str, uris: list[str]) -> list[str]:
    """The URIs of a listen request `principal` may read, in order (each check audited): a stream never carries
    another's resources. Blocking: run it in a worker thread."""
    allowed: list[str] = []
    for uri in uris:
        try:
            dispatcher.run(principal, surface, LISTEN, uri, {"target": uri}, lambda c, uri=uri: read_resource(c, uri))
        except CanonError:
            continue  # not honoured: the client sees it missing from the acknowledged subscriptions
        allowed.append(uri)
    return allowed


@dataclass(frozen=True)
class ListenRequest:
    request_id: RequestId
    version: str
    params: SubscriptionsListenRequestParams


class ListenRoute:
    """Serve 2026-07-28 listen requests from `streams`; pass every other request, untouched, to `app` (the SDK's)."""

    def __init__(self, app: ASGIApp, streams: ListenStreams, *, current: Callable[[], Snapshot], surface: str) -> None:
        self.app = app
        self.streams = streams
        self.current = current  # the current model's snapshot
        self.surface = surface
        self.security = TransportSecurityMiddleware(None)  # its Content-Type check: the host checked Host/Origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not may_be(scope, LISTEN):
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        request = None if body is None else await self.recognise(scope, body)
        if request is None:  # the SDK answers it (an error, or whatever it is)
            await self.app(scope, replay, send)
            return
        await self.serve(request, scope, receive, send)

    async def recognise(self, scope: Scope, body: bytes) -> ListenRequest | None:
        """The listen request in `body`, if the SDK would serve it as a stream (`core.mcp.fastpath.takeover`).
        None sends it to the SDK."""
        found = await recognise(scope, body, self.security, LISTEN, stream=True)
        if found is None:
            return None
        try:
            params = SubscriptionsListenRequestParams.model_validate(found.params or {}, by_name=False)
        except ValueError:
            return None
        return ListenRequest(found.request_id, found.version, params)

    async def serve(self, request: ListenRequest, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            honored = await self.honour(principal_of_scope(scope), request.params.notifications)
        except Exception:  # the outermost boundary of this request: answered as the SDK answers a failing handler
            log.exception("serving subscriptions/listen failed")
            await json_error(request.request_id, _internal("Internal server error"), scope, receive, send)
            return
        if self.streams.full():
            await json_error(request.request_id, _internal("Subscription limit reached"), scope, receive, send)
            return
        stream = self.streams.open(request.request_id, request.version, honored)
        try:
            async with anyio.create_task_group() as tasks:
                # the writer is a task of its own: woken on every event, it resumes a short chain of frames
                tasks.start_soon(_pour, stream, send, tasks.cancel_scope)
                while (await receive())["type"] != "http.disconnect":
                    pass
                tasks.cancel_scope.cancel()
        finally:
            self.streams.discard(stream)

    async def honour(self, principal: Principal, requested: SubscriptionFilter) -> SubscriptionFilter:
        """What the stream will carry: the requested kinds canon serves, and the URIs the caller may read."""
        uris = list(requested.resource_subscriptions or ())
        if uris:
            dispatcher = self.current().dispatcher
            uris = await anyio.to_thread.run_sync(readable_uris, dispatcher, principal, self.surface, uris)
        return SubscriptionFilter(
            tools_list_changed=True if requested.tools_list_changed else None,
            resources_list_changed=True if requested.resources_list_changed else None,
            resource_subscriptions=uris or None,
        )


async def _pour(stream: Stream, send: Send, scope: anyio.CancelScope) -> None:
    await stream.pour(send)
    scope.cancel()  # the response is complete: stop waiting for the client to disconnect


def _internal(message: str) -> ErrorData:
    return ErrorData(code=INTERNAL_ERROR, message=message)
