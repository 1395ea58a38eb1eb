"""What the GraphQL surface's resolvers need at run time, one `Runtime` per served app: the host (the caller, the
dispatcher, the change feed), the app's count of open subscriptions and its checked documents (`gate.Documents`).

The schema itself holds none of this (`generators.graphql.schema`: built once per registry, shared by every app
serving that registry); each request's context carries its app's runtime (`Runtime.context`), and resolvers find
it there (`runtime_of`).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Generator
from typing import Any

import anyio
import strawberry
from graphql import ASTValidationRule

from core.dispatch.resources import ResourceContent, read_resource
from core.seam.surfaces import SurfaceHost
from core.values.errors import CanonError, LimitExceededError
from core.values.principal import Principal
from generators.graphql.bounds import MAX_SUBSCRIPTIONS, canon_error
from generators.graphql.gate import Documents

__all__ = ["Runtime", "call_tool", "runtime_of"]


class Runtime:
    """One app's link to its host: the caller, and the dispatcher (called in a worker thread)."""

    def __init__(self, host: SurfaceHost, budget: type[ASTValidationRule]) -> None:
        self.host = host
        self.surface = host.surface_name or "graphql"
        self.subscriptions = 0
        self.documents = Documents(budget)  # read and written on the app's event loop only

    def context(self, **values: Any) -> dict[str, Any]:
        """A request's context for this app's schema: the runtime, its documents, and `values`."""
        return {"runtime": self, "documents": self.documents, **values}

    def principal(self, info: strawberry.Info) -> Principal:
        context: dict[str, Any] = info.context
        found = context.get("principal")
        return found if isinstance(found, Principal) else self.host.principal_of(context["request"])

    async def call_tool(self, info: strawberry.Info, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        principal = self.principal(info)
        call = functools.partial(self.host.call_tool, received=time.monotonic())  # its time counts the wait
        result = await anyio.to_thread.run_sync(call, principal, name, arguments)
        if result.error is not None:
            raise canon_error(result.error)
        assert result.value is not None
        return result.value

    async def read(self, principal: Principal, uri: str, action: str = "resources/read") -> ResourceContent:
        def work() -> ResourceContent:
            content: ResourceContent = self.host.run(principal, action, uri, lambda ctx: read_resource(ctx, uri))
            return content

        try:
            return await anyio.to_thread.run_sync(work)
        except CanonError as exc:
            raise canon_error(exc) from None

    @contextlib.contextmanager
    def subscription(self) -> Generator[None]:
        """One more open subscription for the block, or a LIMIT_EXCEEDED error when the app holds its maximum."""
        if self.subscriptions >= MAX_SUBSCRIPTIONS:
            raise canon_error(LimitExceededError(f"The server holds its maximum of {MAX_SUBSCRIPTIONS} "
                                                 "subscriptions; try again later.", limit="subscriptions",
                                                 value=MAX_SUBSCRIPTIONS))  # fmt: skip
        self.subscriptions += 1
        try:
            yield
        finally:
            self.subscriptions -= 1


def runtime_of(info: strawberry.Info) -> Runtime:
    """The runtime a request's context carries (`Runtime.context`)."""
    context: Any = info.context
    found = context.get("runtime") if isinstance(context, dict) else None
    if not isinstance(found, Runtime):
        raise TypeError("a GraphQL request's context carries no Runtime: execute the schema with Runtime.context")
    return found


async def call_tool(info: strawberry.Info, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call through the dispatcher of the request's app."""
    return await runtime_of(info).call_tool(info, name, arguments)
