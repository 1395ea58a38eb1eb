"""Prometheus metrics of one server process: calls counted and timed, live state read when scraped.

    canon_calls_total{surface, action, tool, outcome}      every call the dispatcher audits
    canon_call_duration_seconds{surface, action, tool}     their latency (a histogram)
    canon_<gauge>                                          live state, each read at scrape time (`Metrics.gauge`)

Calls are counted from the dispatcher's audit records (`Metrics.observe` is an audit hook): the hot path pays one
dict look-up, one increment and one histogram observation per call, nothing else. Gauges are callbacks, so open
streams, sessions and queues are never counted on the way in and out. Labels come from fixed sets only: the
surface, the action, the tool's name (`AuditRecord.tool`: "" for anything but a known tool) and the outcome; never
an argument, a resource URI, a principal or a token.

Each process has its own `Metrics` (its own `CollectorRegistry`): with `--workers N`, a scrape is answered by one
worker and shows that worker's counts (docs/operations/observability.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from core.values.audit import AuditRecord

__all__ = ["Metrics"]

BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""From half a millisecond (a point read) to the default call bound of 10 s."""


@dataclass(frozen=True)
class _Gauge:
    name: str
    documentation: str
    read: Callable[[], float]


class _LiveGauges(Collector):
    """Gauges whose values are read when scraped; one of a name, the last added."""

    def __init__(self) -> None:
        self._gauges: dict[str, _Gauge] = {}
        self._lock = threading.Lock()

    def add(self, gauge: _Gauge) -> None:
        with self._lock:
            self._gauges[gauge.name] = gauge

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            gauges = list(self._gauges.values())
        for gauge in gauges:
            yield GaugeMetricFamily(gauge.name, gauge.documentation, value=gauge.read())


class Metrics:
    """The metrics of one process: an audit hook that counts calls, and gauges read when scraped."""

    content_type = CONTENT_TYPE_LATEST  # of `render()`'s text

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._calls = Counter("canon_calls", "Calls the dispatcher audited, by surface, action, tool and outcome.",
                              ("surface", "action", "tool", "outcome"), registry=self.registry)  # fmt: skip
        self._seconds = Histogram("canon_call_duration_seconds", "How long calls took, from receipt to result.",
                                  ("surface", "action", "tool"), buckets=BUCKETS_S, registry=self.registry)  # fmt: skip
        self._children: dict[tuple[str, str, str, str], tuple[Counter, Histogram]] = {}
        self._live = _LiveGauges()
        self.registry.register(self._live)
        ProcessCollector(registry=self.registry)

    def observe(self, record: AuditRecord) -> None:
        """Count and time one audited call (a `Dispatcher` audit hook)."""
        key = (record.surface, record.action, record.tool, record.outcome)
        children = self._children.get(key)
        if children is None:  # the first call of its kind: label look-ups once, not on every call
            labels = key[:3]
            children = self._children[key] = (self._calls.labels(*key), self._seconds.labels(*labels))
        children[0].inc()
        children[1].observe(record.duration_ms / 1000)

    __call__ = observe

    def gauge(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """Report `read()` as the gauge `name` at every scrape (replacing a gauge of that name)."""
        self._live.add(_Gauge(name, documentation, read))

    def render(self) -> bytes:
        """The text exposition format of every metric, as a scrape gets it."""
        return generate_latest(self.registry)
