"""MCP log messages (`notifications/message`) for 2025-11-25 clients that ask for them with `logging/setLevel`.

A connection hears nothing until it sets a level; from then on it hears, at and above that level:

| level   | when                                                                                |
|---------|-------------------------------------------------------------------------------------|
| debug   | every tool call it makes: tool, outcome, duration                                   |
| info    | a bound stopped a read it made before every match was found (not a page's end)      |
| notice  | a call of its own took longer than `SLOW_CALL_S`; the model changed (new version)   |
| warning | a call of its own was refused: a write or a read (code and message)                 |

Every message repeats only what that caller was already answered (its own call's outcome, its own error
message) or what every caller may read (the model's id and version), so a log never carries data the caller
may not see. 2026-07-28 deprecates logging (SEP-2577) and canon answers that revision in JSON, where a
per-request log has no stream to ride: there canon neither serves `logging/setLevel` nor advertises logging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from mcp.server.context import ServerRequestContext
from mcp_types import LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParams

from core.dispatch.dispatcher import ToolResult
from core.mcp.events import EventFanout
from core.values.records import Change

__all__ = ["LEVELS", "SLOW_CALL_S", "ClientLog"]

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # debug … emergency, in rising severity
SLOW_CALL_S = 1.0
LOGGER = "canon"


def _rank(level: LoggingLevel) -> int:
    return LEVELS.index(level)


class ClientLog:
    """The level each 2025-11-25 connection asked for, and the messages it is owed."""

    def __init__(self, fanout: EventFanout) -> None:
        self.fanout = fanout
        self._levels: dict[int, LoggingLevel] = {}  # connection key -> the lowest level it asked to hear
        fanout.add_model_listener(self.model_changed)

    def set_level(self, ctx: ServerRequestContext[Any], level: LoggingLevel) -> None:
        key = self.fanout.remember(ctx)
        if key not in self._levels:
            self.fanout.on_forget(key, lambda: self._levels.pop(key, None))
        self._levels[key] = level

    def level_of(self, ctx: ServerRequestContext[Any]) -> LoggingLevel | None:
        return self._levels.get(self.fanout.connection_key(ctx))

    async def call_done(self, ctx: ServerRequestContext[Any], result: ToolResult, seconds: float) -> None:
        """Tell the caller what its own call did, at the levels it asked for."""
        wanted = self.level_of(ctx)
        if wanted is None:
            return
        for level, data in call_messages(result, seconds):
            if _rank(level) >= _rank(wanted):
                await self.fanout.tell_connection(ctx, _message(level, data))

    async def model_changed(self, changes: Sequence[Change]) -> None:
        """Every connection that asked for notice (or below) hears of each model change."""
        listeners = [key for key, level in self._levels.items() if _rank(level) <= _rank("notice")]
        for change in changes:
            if change.kind == "model" and listeners:
                after: Mapping[str, Any] = change.after or {}
                data = {"event": "model_changed", "revision": change.revision,
                        "model": after.get("id"), "version": after.get("version"),
                        "message": "The model changed: tools/list and the type resources may differ now."}  # fmt: skip
                await self.fanout.tell_keys(listeners, _message("notice", data))


def call_messages(result: ToolResult, seconds: float) -> list[tuple[LoggingLevel, dict[str, Any]]]:
    """The messages one call earns, lowest level first. Built from the call's own answer only."""
    outcome = result.error.code if result.error is not None else "ok"
    took = {"tool": result.tool, "duration_ms": round(seconds * 1000, 1)}
    out: list[tuple[LoggingLevel, dict[str, Any]]] = [("debug", {"event": "call", **took, "outcome": outcome})]
    value = result.value or {}
    if value.get("truncated") is True and value.get("next_cursor") is None:  # a bound stopped it, not a page end
        out.append(("info", {"event": "truncated", **took, "total": value.get("total"),
                             "message": "A bound stopped the work before every match was found; narrow the request "
                                        "(fewer hops, a smaller pattern, a start node) to see the rest."}))  # fmt: skip
    if seconds >= SLOW_CALL_S:
        out.append(("notice", {"event": "slow_call", **took}))
    if result.error is not None:
        out.append(("warning", {"event": "refused", **took, "code": outcome, "message": str(result.error)}))
    return out


def _message(level: LoggingLevel, data: dict[str, Any]) -> LoggingMessageNotification:
    return LoggingMessageNotification(params=LoggingMessageNotificationParams(level=level, data=data, logger=LOGGER))
