"""`/metrics`: this process's Prometheus metrics (`core.ops.metrics`), served by the HTTP host.

On unless `[metrics] enabled = false` (`CANON_METRICS=0`). Open to any caller the server admits, like `/healthz`,
unless `[metrics] protected = true`: then it answers only a bearer token whose role grants `admin` (401 without a
token, 403 with another role). A bad token is a 401 as on every route, audited as `rejected`.

The host adds the gauges of what it holds open (the change feed's watches) and those each running surface reports
(`core.seam.surfaces.Running.gauges`: MCP's sessions and streams), each read at scrape time; the domain's own (store
revision, index lag, audit queue) come with `Instance.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response

from core.http.auth import BearerGate
from core.seam.instance import Instance
from core.seam.surfaces import Gauge, principal_of_request
from core.web.problems import PROBLEM_MEDIA, problem_body

__all__ = ["PATH", "add_gauges", "metrics_route"]

PATH = "/metrics"


def add_gauges(instance: Instance, gauges: Iterable[Gauge]) -> None:
    """Report `gauges` among `instance`'s process metrics, each read at every scrape (nothing when metrics are off)."""
    if not instance.config.metrics:
        return
    metrics = instance.metrics()
    for gauge in gauges:
        metrics.gauge(gauge.name, gauge.documentation, gauge.read)


def metrics_route(instance: Instance, gauges: Iterable[Gauge], on_reject: Callable[[str, str], None]) -> Route | None:
    """The `/metrics` route of `instance`'s process, with `gauges` among its gauges; None when metrics are off."""
    config = instance.config
    if not config.metrics:
        return None
    add_gauges(instance, gauges)
    metrics = instance.metrics()

    async def scrape(request: Request) -> Response:
        if config.metrics_protected and "admin" not in principal_of_request(request).permissions:
            detail = "The metrics need a bearer token with the admin role."
            return Response(problem_body(403, "forbidden", detail, PATH), 403, media_type=PROBLEM_MEDIA)
        return Response(metrics.render(), media_type=metrics.content_type)

    gate = BearerGate(request_response(scrape), anonymous=config.anonymous and not config.metrics_protected,
                      on_reject=on_reject)  # fmt: skip
    return Route(PATH, gate, methods=["GET", "HEAD"])
