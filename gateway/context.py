"""Per-request context: an unguessable request id on every response, the Idempotency-Key, and
one outcome per request recorded in the metrics.

A pure ASGI middleware (cheaper than Starlette's BaseHTTPMiddleware on the hot path) gives every
HTTP request a typed ``RequestContext`` (``request_context(request)`` returns it). Handlers set
its ``model`` and, on failure, its ``ending``; the middleware records
``shunter_requests{route, model, outcome}`` and the duration when the last body byte is sent, or
``cancelled`` when the client went away first. A request that the scheduler dispatched also gets
``x-queue-wait-ms`` (admission to dispatch), ``x-shunter-pool`` (where it ran) and
``x-shunter-model-version`` (which version served it), and is counted per model version
(``shunter_version_requests``, ``shunter_version_latency_seconds``: time to first token where the
handler measured one, else the whole request), which the canary analysis compares. A request that
used the response cache says so in ``x-shunter-cache`` (``hit``: every row from the cache, ``partial``,
``miss``); a full hit reaches no worker, so it answers ``x-shunter-pool: cache`` and a queue wait of 0,
and still counts for the version whose cached rows served it.

Labels stay bounded whatever clients send: a model name that is not configured is counted as
``unknown``, and a path that matches no route is not counted. Every response of 400 or more
logs one line (request id, method, route, status, outcome; never the payload). An exception no
handler mapped is answered here, while the response has not started: 500 ``internal_error`` in
the error body, with ``x-request-id``, and the log line names the exception's type and where it
was raised.
"""

from __future__ import annotations

import logging
import secrets
import time
import traceback
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.access_log import access_fields
from gateway.errors import GatewayError
from gateway.metrics import GatewayMetrics
from gateway.outcomes import CANCELLED, COMPLETED, Ending
from gateway.responses import JSONResponse
from scheduling.outcomes import Dispatch, Outcome
from settings.access_log import AccessLog

if TYPE_CHECKING:
    from gateway.dispatcher import Ticket

REQUEST_ID_HEADER = b"x-request-id"
USER_HEADER = b"x-shunter-user"  # the end user a request is for: what A/B tests sticky to users follow
_MAX_USER_CHARS = 256
_MAX_IDEMPOTENCY_KEY_CHARS = 255
_SCOPE_KEY = "shunter"
_UNOBSERVED_PATHS = ("/metrics", "/healthz", "/readyz")
UNKNOWN_MODEL = "unknown"
_MAX_LOGGED_PATH_CHARS = 120
log = logging.getLogger("gateway.requests")


@dataclass
class RequestContext:
    """What the gateway learns about one HTTP request while serving it."""

    request_id: str
    tenant: str | None = None
    model: str | None = None
    model_version: int | None = None  # the version chosen for it (``routing.version_for``)
    idempotency_key: str | None = None
    dispatch: Dispatch | None = None  # set once the scheduler released it to a worker
    ending: Ending | None = None  # set on failure (and by streams); None means "by HTTP status"
    ttft_s: float | None = None  # time to first token, for streamed generations
    cache: str | None = None  # "hit" | "partial" | "miss" where the model has a response cache
    user: str | None = None  # the x-shunter-user header, when present and well formed
    tier: str | None = None  # the tenant's tier, once authenticated
    tokens_in: int | None = None  # the request's cost in prompt tokens, once admitted
    ticket: Ticket | None = None  # the scheduler's ticket, once dispatched (its last worker, tokens out)
    trace_id: str | None = None  # the W3C trace id (32 hex) when tracing is on

    @property
    def served(self) -> bool:
        """Whether a version served it: dispatched to a worker, or answered whole from the cache."""
        return self.model_version is not None and (self.dispatch is not None or self.cache == "hit")


def request_context(connection: HTTPConnection) -> RequestContext:
    """The context the middleware made for this request."""
    context: RequestContext = connection.scope["state"][_SCOPE_KEY]
    return context


async def send_error(scope: Scope, receive: Receive, send: Send, error: GatewayError) -> None:
    """Answer ``error`` from ASGI middleware, in the body of the route family (KServe or OpenAI)."""
    request_context(HTTPConnection(scope)).ending = error.ending
    body = error.kserve_body() if scope["path"].startswith("/v2/") else error.body()
    await JSONResponse(body, status_code=error.status, headers=error.headers())(scope, receive, send)


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


def end_user(scope: Scope) -> str | None:
    """The request's ``x-shunter-user`` header (visible ASCII, at most 256 characters), else None."""
    for name, value in scope.get("headers", ()):
        if name == USER_HEADER:
            text = value.decode("latin-1")
            return text if 0 < len(text) <= _MAX_USER_CHARS and text.isascii() and text.isprintable() else None
    return None


def _dispatch_headers(context: RequestContext) -> list[tuple[bytes, bytes]]:
    cache = [] if context.cache is None else [(b"x-shunter-cache", context.cache.encode())]
    if not context.served:
        return cache
    queue_wait_s, pool = (0.0, "cache") if context.dispatch is None else (context.dispatch.queue_wait_s,
                                                                         context.dispatch.pool)
    return [(b"x-queue-wait-ms", f"{queue_wait_s * 1000:.1f}".encode()), (b"x-shunter-pool", pool.encode()),
            (b"x-shunter-model-version", str(context.model_version).encode()), *cache]


def _ending(context: RequestContext, status: int) -> Ending:
    if context.ending is not None:
        return context.ending
    if status == 499:
        return CANCELLED
    return COMPLETED if status < 400 else Ending(Outcome.REJECTED, f"http_{status}")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: GatewayMetrics, known_models: Collection[str] = (),
                 access_log: AccessLog | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.known_models = frozenset(known_models)
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = RequestContext(new_request_id(), user=end_user(scope))
        scope.setdefault("state", {})[_SCOPE_KEY] = context
        started = time.perf_counter()
        status = 500
        response_started = finished = False
        failure = ""

        async def send_with_id(message: Message) -> None:
            nonlocal status, finished, response_started
            if message["type"] == "http.response.start":
                status, response_started = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (REQUEST_ID_HEADER, context.request_id.encode()),
                                      *_dispatch_headers(context)]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            failure = _raised(exc)
            if response_started:
                raise
            await send_error(scope, receive, send_with_id, GatewayError("internal error; the request id identifies it"))
        finally:
            final_status = status if finished else 499
            _log_error(scope, context, final_status, failure)
            self._observe(scope, context, final_status, started)
            self._log_access(scope, context, final_status, started, failure)

    def model_label(self, context: RequestContext) -> str:
        """The model a request named, if it is a configured one; else ``unknown`` (bounded labels)."""
        if not context.model:
            return ""
        return context.model if context.model in self.known_models else UNKNOWN_MODEL

    def _observe(self, scope: Scope, context: RequestContext, status: int, started: float) -> None:
        path = getattr(scope.get("route"), "path", None)
        if path is None or path in _UNOBSERVED_PATHS:
            return
        model = self.model_label(context)
        ending = _ending(context, status)
        self.metrics.requests.labels(path, model, ending.label).inc()
        duration_s = time.perf_counter() - started
        self.metrics.duration_s.labels(path, model).observe(duration_s)
        if context.served and model != UNKNOWN_MODEL:
            version = str(context.model_version)
            self.metrics.version_requests.labels(model, version, ending.outcome.value).inc()
            if ending.outcome is Outcome.COMPLETED:
                latency_s = context.ttft_s if context.ttft_s is not None else duration_s
                self.metrics.version_latency_s.labels(model, version).observe(latency_s)


    def _log_access(self, scope: Scope, context: RequestContext, status: int, started: float, failure: str) -> None:
        """One access-log line per request (not for scrapes and probes that succeeded)."""
        if self.access_log is None:
            return
        path = getattr(scope.get("route"), "path", None)
        if path in _UNOBSERVED_PATHS and status < 400:
            return
        duration_s = time.perf_counter() - started
        self.access_log.write(access_fields(scope, context, status, _ending(context, status), duration_s,
                                            failure, self.model_label(context)))


def _route(scope: Scope) -> str:
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    raw = str(scope.get("path", ""))[:_MAX_LOGGED_PATH_CHARS]  # a client's text: no line breaks into the log
    return "".join(c if c.isprintable() else "?" for c in raw)


def _log_error(scope: Scope, context: RequestContext, status: int, failure: str) -> None:
    """One line per response of 400 or more: who, what, how it ended; never the payload."""
    if status < 400 and not failure:
        return
    level = logging.ERROR if status >= 500 or failure else logging.WARNING
    log.log(level, "%s %s %s -> %d %s tenant=%s%s", context.request_id, scope.get("method", ""), _route(scope),
            status, _ending(context, status).label, context.tenant or "-", failure)


def _raised(exc: Exception) -> str:
    """The exception's type and the place it was raised (not its message: it may quote the payload)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
    return f" raised {type(exc).__name__} at {where}"
