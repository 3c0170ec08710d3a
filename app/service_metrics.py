"""Prometheus metrics, one registry per app instance (so tests and reloads never clash)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.route_table import METHODS, RouteTable

__all__ = ["Metrics", "MetricsMiddleware"]


class Metrics:
    """The service's counters and histograms, registered in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "cxr_http_requests",
            "HTTP requests by route template, method and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "cxr_http_request_duration_seconds",
            "HTTP request latency by route template.",
            ["method", "route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.predictions = Counter(
            "cxr_predictions",
            "Images run through the model (API and batch jobs).",
            ["source"],
            registry=self.registry,
        )
        self.inference_seconds = Histogram(
            "cxr_inference_seconds",
            "Model forward time per micro-batch.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.inference_batch_size = Histogram(
            "cxr_inference_batch_size",
            "Images per forward pass of the API's micro-batching queue.",
            buckets=(1, 2, 4, 8, 16, 32),
            registry=self.registry,
        )
        self.reports = Counter(
            "cxr_reports_labeled", "Reports labeled.", ["source"], registry=self.registry
        )
        self.batch_items = Counter(
            "cxr_batch_items",
            "Batch job files processed, by outcome.",
            ["state"],
            registry=self.registry,
        )
        self.batch_jobs = Gauge(
            "cxr_batch_jobs", "Batch jobs by state.", ["state"], registry=self.registry
        )
        self.model_loaded = Gauge(
            "cxr_model_loaded", "1 when an image model is loaded.", registry=self.registry
        )


# Every label value comes from a fixed set, whatever clients send (issue 18 item 10: one
# time series per made-up method name grew /metrics from 50 KB to 172 MB).
_UNMATCHED = "unmatched"
_OTHER_METHOD = "OTHER"
_METHODS = frozenset(METHODS)


def _method_label(scope: Scope) -> str:
    method = str(scope.get("method", ""))
    return method if method in _METHODS else _OTHER_METHOD


def _status_label(status: int) -> str:
    # ASGI servers send only three-digit codes; anything else would be a bug of ours.
    return str(status) if 100 <= status <= 599 else "invalid"


class MetricsMiddleware:
    """Pure ASGI middleware counting requests and latencies by route template.

    Labels: the method (the standard ones, any other as OTHER), the route template (a
    path no route matches as `unmatched`) and the status code.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: RouteTable) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()
        # Matched before routing, which rewrites parts of the scope for mounted apps.
        template = self.routes.match(scope).template or _UNMATCHED
        method = _method_label(scope)

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.requests.labels(method, template, _status_label(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - start)
