"""Traces: one OpenTelemetry span per dispatched call, when `[tracing] enabled` turns them on.

`CallSpans` is a dispatcher audit hook: from each audit record it makes one span, `<action> <tool>` (for example
`tools/call get_node`, or `resources/read`), timed as the call was and parented to whatever span is current (an
instrumented HTTP server's request span, say). Its attributes are the record's fixed-set fields only:

    canon.surface   mcp-stdio, mcp-http, rest, graphql, llms
    canon.action    tools/call, tools/list, resources/read, ...
    canon.tool      the tool's name (`AuditRecord.tool`: "" for anything but a known tool)
    canon.outcome   ok, invalid, not_found, forbidden, ... (`core.dispatch.dispatcher.OUTCOMES`)
    canon.revision  the store revision the call was answered at

never an argument, a resource URI, a principal or a token. canon depends on the OpenTelemetry API only: spans go
wherever the process's tracer provider sends them (set up by `opentelemetry-instrument` and the SDK, or by an
application embedding canon); without one they cost a no-op.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from core.values.audit import AuditRecord

__all__ = ["CallSpans"]

FAILED = frozenset({"failed", "error"})
"""Outcomes that are canon's failure, not the caller's mistake: their spans are marked as errors."""


class CallSpans:
    """An audit hook that records each call as one span of `tracer` (default: the global provider's `canon`)."""

    def __init__(self, tracer: trace.Tracer | None = None) -> None:
        self._tracer = tracer or trace.get_tracer("canon")

    def __call__(self, record: AuditRecord) -> None:
        end = time.time_ns()
        start = end - int(record.duration_ms * 1_000_000)
        tool = record.tool
        span = self._tracer.start_span(
            f"{record.action} {tool}" if tool else record.action,
            kind=SpanKind.INTERNAL,
            start_time=start,
            attributes={
                "canon.surface": record.surface,
                "canon.action": record.action,
                "canon.tool": tool,
                "canon.outcome": record.outcome,
                "canon.revision": record.revision,
            },
        )
        if record.outcome in FAILED:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)
