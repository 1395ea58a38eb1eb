"""The test process's OpenTelemetry SDK: one tracer provider (a process may set it once) with an in-memory exporter."""

from __future__ import annotations

from functools import cache

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@cache
def exported() -> InMemorySpanExporter:
    """The exporter every span of this process ends in (set up on first use); `clear()` it before a test's calls."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter
