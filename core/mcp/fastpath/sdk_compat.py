"""The one module that touches the MCP SDK's private state, and the start-up check that the SDK still has it.

canon answers parts of the SDK's Streamable HTTP transport itself (`core.mcp.fastpath`: ADRs 0013, 0015, 0016)
and gives each 2025-11-25 session an event store of its own (ADR 0006). Both lean on SDK internals with no
promise behind them: private attributes (`_request_streams`, `_requests_in_flight`, `_idle_timeout` of the
transport; `_server_instances`, `_session_owners`, `_admit_session` of the session manager; `_connection` of the
per-request session) and module names that are public by name only (`classify_inbound_request`,
`modern_error_data`, `GET_STREAM_KEY`, ...). Every read or write of a private SDK attribute is a named function
here; nothing else in canon names one.

`check()` compares the installed SDK with what canon was written against: the version (`TESTED`), and the
shapes in `EXPECTED` (names present, callables taking the parameters canon passes, classes where classes are
expected) and the private attributes (probed on throwaway SDK objects, as the SDK's own code sets them).
`fastpath(enabled)`, called once when an HTTP app is built, runs it: if anything differs canon logs one warning
naming every difference and the app serves `/mcp` through the plain SDK path (the SDK's own routes, no
`CallRoute`/`ListenRoute`/`LegacyRoute`), slower but correct, instead of failing or misbehaving at the first
request. `enabled` is the user's switch (`[server] mcp_fastpath`, `CANON_MCP_FASTPATH`).

An SDK bump is a review of this file: run `canon serve` and look for the warning, then the byte-for-byte tests
of `tests/mcp/fastpath/`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
import logging
import math
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.streamable_http import GET_STREAM_KEY, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from core.mcp.event_store import MemoryEventStore

__all__ = [
    "EXPECTED", "TESTED", "Compat", "Expected", "SessionManager", "check", "connection_of", "fastpath",
    "has_get_stream", "hold_get_stream", "in_flight", "release_get_stream", "session_manager", "session_owner",
    "session_transport",
]  # fmt: skip

log = logging.getLogger("canon.sdk")
TESTED = "2.3."
"""The SDK minor canon's bypass is tested against, byte for byte (pyproject pins it)."""


# -- what canon expects of the SDK ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    """One module-level name canon imports from the SDK: a callable taking `params` (by these names), a class
    (`kind=type`), or a value of `kind`."""

    module: str
    name: str
    params: tuple[str, ...] = ()
    kind: type | None = None

    def difference(self) -> str | None:
        """What is wrong with the installed SDK's name, or None if it is as expected."""
        where = f"{self.module}.{self.name}"
        try:
            value = getattr(importlib.import_module(self.module), self.name)
        except (ImportError, AttributeError):
            return f"{where} is missing"
        if self.kind is not None and not (isinstance(value, self.kind)):
            return f"{where} is not a {self.kind.__name__}"
        if self.params:
            if not callable(value):
                return f"{where} is not callable"
            missing = [p for p in self.params if p not in _parameters(value)]
            if missing:
                return f"{where} takes no parameter {', '.join(missing)}"
        return None


def _parameters(value: Any) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(value).parameters
    except (TypeError, ValueError):
        return {}


_HTTP, _INBOUND = "mcp.server.streamable_http", "mcp.shared.inbound"
EXPECTED = (
    Expected(_HTTP, "GET_STREAM_KEY", kind=str),
    Expected(_HTTP, "REQUEST_STREAM_BUFFER_SIZE", kind=int),
    Expected(_HTTP, "LAST_EVENT_ID_HEADER", kind=str),
    Expected(_HTTP, "MCP_SESSION_ID_HEADER", kind=str),
    Expected(_HTTP, "EventMessage", kind=type),
    Expected(_HTTP, "check_accept_headers", ("request",)),
    Expected(_INBOUND, "classify_inbound_request", ("body", "headers")),
    Expected(_INBOUND, "find_duplicated_routing_header", ("headers",)),
    Expected(_INBOUND, "InboundLadderRejection", kind=type),
    Expected(_INBOUND, "ERROR_CODE_HTTP_STATUS", kind=Mapping),
    Expected(_INBOUND, "MCP_PROTOCOL_VERSION_HEADER", kind=str),
    Expected("mcp.server.runner", "modern_error_data", ("exc",)),
    Expected("mcp.server.auth.middleware.bearer_auth", "authorization_context", ("user",)),
    Expected("mcp.shared.subscriptions", "event_to_notification", ("event", "meta")),
    Expected("mcp_types.methods", "validate_client_request", ("method", "version", "params")),
)
"""The SDK names the bypass imports that the SDK does not promise to keep."""


@dataclass(frozen=True)
class Compat:
    """What `check` found: the installed SDK's version and every difference from what canon expects."""

    version: str
    differences: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.differences


def check() -> Compat:
    """Compare the installed SDK with what canon's bypass relies on (see the module doc). Cheap: no I/O."""
    version = _version()
    differences: list[str] = [] if version.startswith(TESTED) else [f"mcp {version} is not the tested {TESTED}x"]
    differences += [d for e in EXPECTED if (d := e.difference()) is not None]
    differences += _transport_differences() + _manager_differences() + _session_differences()
    return Compat(version, tuple(differences))


def _version() -> str:
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _transport_differences() -> list[str]:
    """`StreamableHTTPServerTransport`: its stream table, in-flight counter and idle timeout, as its `__init__`
    sets them."""
    try:
        probe = StreamableHTTPServerTransport(mcp_session_id=None, idle_timeout=1.0)
    except TypeError as exc:
        return [f"StreamableHTTPServerTransport(mcp_session_id, idle_timeout) cannot be built: {exc}"]
    found = vars(probe)
    wanted: dict[str, Any] = {"_request_streams": {}, "_requests_in_flight": 0, "_idle_timeout": 1.0}
    return [f"StreamableHTTPServerTransport.{name} is missing or not {value!r} on a new transport"
            for name, value in wanted.items() if found.get(name, ...) != value]  # fmt: skip


def _manager_differences() -> list[str]:
    """`StreamableHTTPSessionManager`: its session and owner tables, and `_admit_session(requestor)` building a
    session's transport with the manager's `event_store` of the moment (the per-session store hook)."""
    try:
        probe = StreamableHTTPSessionManager(app=_NO_SERVER)
    except TypeError as exc:
        return [f"StreamableHTTPSessionManager(app) cannot be built: {exc}"]
    found = vars(probe)
    differences = [f"StreamableHTTPSessionManager.{name} is missing or not a dict"
                   for name in ("_server_instances", "_session_owners")
                   if not isinstance(found.get(name), dict)]  # fmt: skip
    if not _session_hook():
        differences.append("StreamableHTTPSessionManager._admit_session(requestor) is missing")
    return differences


_NO_SERVER: Any = None  # the manager only stores its app until it runs


def _session_hook() -> bool:
    """Whether the SDK's manager builds each session's transport in `_admit_session(requestor)`, from its
    `event_store`: what `SessionManager` overrides."""
    admit = getattr(StreamableHTTPSessionManager, "_admit_session", None)
    return callable(admit) and "requestor" in _parameters(admit)


def _session_differences() -> list[str]:
    """`ServerSession._connection`: the per-connection state behind a per-request session."""
    connection = SimpleNamespace(protocol_version="2025-11-25")
    try:
        probe = ServerSession(_NO_SERVER, connection)  # pyright: ignore[reportArgumentType]
    except TypeError as exc:
        return [f"ServerSession(request_outbound, connection) cannot be built: {exc}"]
    if vars(probe).get("_connection") is not connection:
        return ["ServerSession._connection is missing"]
    return []


def fastpath(enabled: bool) -> bool:
    """Whether an app being built serves `/mcp` through canon's bypass: `enabled` (the user's switch) and the SDK
    as expected. Otherwise the plain SDK path, with one warning naming each difference when the SDK differs."""
    compat = check()
    if not compat.ok:
        resumption = "" if _session_hook() else "; 2025-11-25 sessions cannot resume streams (no event store)"
        log.warning("canon: the installed MCP SDK (mcp %s) differs from what canon's fast path relies on: %s. "
                    "Serving /mcp through the plain SDK path (correct, slower)%s.", compat.version,
                    "; ".join(compat.differences), resumption)  # fmt: skip
        return False
    if not enabled:
        log.info("canon: the MCP fast path is off ([server] mcp_fastpath); /mcp is served by the SDK alone")
    return enabled


# -- 2025-11-25 sessions: one event store each (ADR 0006) -----------------------------------------------------------
class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with an event store of its own for every 2025-11-25 session.

    The SDK hands one event store to every session and files each session's standalone stream under the same
    name, so with a shared store `Last-Event-ID` from one session would replay another session's messages
    (other principals' data included). A store per session makes resumption see only its own session's events;
    it goes away with the session.

    Upstream: the SDK has no per-session event store hook (FastMCP fixed the same leak with a session-scoped
    store adapter). Delete this class when the SDK scopes replay to the session itself or takes a store factory.
    """

    def __init__(self, *args: Any, events_per_session: int = 1_000, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events_per_session = events_per_session

    def _admit_session(self, requestor: Any) -> Any:
        # no await between these two lines: the new transport is built with this session's own store
        self.event_store = MemoryEventStore(self.events_per_session)
        return super()._admit_session(requestor)  # pyright: ignore[reportUnknownMemberType]


def session_manager(**kwargs: Any) -> StreamableHTTPSessionManager:
    """The session manager for `/mcp` (the SDK's arguments): `SessionManager`, or, if the SDK no longer builds
    sessions where it overrides that, the SDK's own without an event store (no resumption rather than replaying
    one session's events to another)."""
    if _session_hook():
        return SessionManager(event_store=MemoryEventStore(), **kwargs)
    return StreamableHTTPSessionManager(event_store=None, **kwargs)


# -- the private state the bypass reads and writes -------------------------------------------------------------------
def connection_of(ctx: ServerRequestContext[Any]) -> Connection:
    """The connection behind a request's session (the SDK builds a session per request, a connection per client)."""
    return ctx.session._connection  # pyright: ignore[reportPrivateUsage]


def session_transport(manager: StreamableHTTPSessionManager, session_id: str) -> StreamableHTTPServerTransport | None:
    """The live session's transport, as the manager routes a request with this `Mcp-Session-Id`."""
    sessions: dict[str, StreamableHTTPServerTransport] = manager._server_instances  # pyright: ignore[reportPrivateUsage]
    return sessions.get(session_id)


def session_owner(manager: StreamableHTTPSessionManager, session_id: str) -> Any:
    """Who opened the session (the SDK's authorization context; None: anonymous), as the manager compares it."""
    owners: dict[str, Any] = manager._session_owners  # pyright: ignore[reportPrivateUsage]
    return owners.get(session_id)


def _places(transport: StreamableHTTPServerTransport) -> dict[Any, Any]:
    return transport._request_streams  # pyright: ignore[reportPrivateUsage]


def has_get_stream(transport: StreamableHTTPServerTransport) -> bool:
    """Whether the session's standalone (GET) stream is taken, in the SDK transport's stream table."""
    return GET_STREAM_KEY in _places(transport)


def hold_get_stream(transport: StreamableHTTPServerTransport, place: tuple[Any, Any]) -> None:
    """Take the session's standalone stream in the SDK transport with `place` (send and receive ends): the SDK
    refuses a second GET stream and puts what it sends there into `place`; when the session ends it closes it."""
    _places(transport)[GET_STREAM_KEY] = place


def release_get_stream(transport: StreamableHTTPServerTransport, place: tuple[Any, Any]) -> None:
    """Give the SDK its standalone stream's place back, if `place` still holds it."""
    places = _places(transport)
    if places.get(GET_STREAM_KEY) is place:
        del places[GET_STREAM_KEY]


@contextlib.contextmanager
def in_flight(transport: StreamableHTTPServerTransport) -> Generator[None]:
    """Count a request as one in flight, as the SDK's transport counts its own: an open GET stream holds the session
    open, and its idle countdown starts again when the last request ends."""
    idle, timeout = transport.idle_scope, transport._idle_timeout  # pyright: ignore[reportPrivateUsage]
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1  # pyright: ignore[reportPrivateUsage]
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1  # pyright: ignore[reportPrivateUsage]
        if not transport._requests_in_flight:  # pyright: ignore[reportPrivateUsage]
            idle.deadline = anyio.current_time() + timeout
