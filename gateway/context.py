"""Per-request context: an unguessable request id on every response, the Idempotency-Key, and
one outcome per request recorded in the metrics.

A pure ASGI middleware (cheaper than Starlette's BaseHTTPMiddleware on the hot path). Handlers
put ``model`` and, on failure, ``outcome`` into ``scope["state"]``; the middleware records
``shunter_requests{route, model, outcome}`` and the duration when the last body byte is sent, or
``cancelled`` when the client went away first. A request that the scheduler dispatched also gets
``x-queue-wait-ms`` (admission to dispatch), ``x-shunter-pool`` (where it ran) and
``x-shunter-model-version`` (which version served it), and is counted per model version
(``shunter_version_requests``, ``shunter_version_latency_seconds``: time to first token where the
handler measured one, else the whole request), which the canary analysis compares.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.metrics import GatewayMetrics

REQUEST_ID_HEADER = b"x-request-id"
_MAX_IDEMPOTENCY_KEY_CHARS = 255


def new_request_id() -> str:
    return "req_" + secrets.token_urlsafe(18)


def idempotency_key(scope: Scope) -> str | None:
    """The request's Idempotency-Key header if present and well formed (visible ASCII)."""
    for name, value in scope.get("headers", ()):
        if name == b"idempotency-key":
            text = value.decode("latin-1")
            if 0 < len(text) <= _MAX_IDEMPOTENCY_KEY_CHARS and text.isascii() and text.isprintable():
                return text
            return ""
    return None


def _dispatch_headers(state: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    dispatch = state.get("dispatch")
    if dispatch is None:
        return []
    return [(b"x-queue-wait-ms", f"{dispatch.queue_wait_s * 1000:.1f}".encode()),
            (b"x-shunter-pool", dispatch.pool.encode()),
            (b"x-shunter-model-version", str(state.get("model_version", "")).encode())]


def _outcome(state: dict[str, Any], status: int) -> str:
    if "outcome" in state:
        return str(state["outcome"])
    return "completed" if status < 400 else f"rejected(http_{status})"


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        finished = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, finished
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (REQUEST_ID_HEADER, request_id.encode()),
                                      *_dispatch_headers(state)]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._observe(scope, state, status if finished else 499, started)

    def _observe(self, scope: Scope, state: dict[str, Any], status: int, started: float) -> None:
        route = scope.get("route")
        path = getattr(route, "path", None)
        if path is None or path in ("/metrics", "/healthz", "/readyz"):
            return
        model = str(state.get("model", ""))
        outcome = "cancelled" if status == 499 and "outcome" not in state else _outcome(state, status)
        self.metrics.requests.labels(path, model, outcome).inc()
        duration_s = time.perf_counter() - started
        self.metrics.duration_s.labels(path, model).observe(duration_s)
        if "dispatch" in state and "model_version" in state:
            version = str(state["model_version"])
            self.metrics.version_requests.labels(model, version, outcome.partition("(")[0]).inc()
            if outcome == "completed":
                latency_s = float(state.get("ttft_s", duration_s))
                self.metrics.version_latency_s.labels(model, version).observe(latency_s)
