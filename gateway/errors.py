"""One error taxonomy for everything a client can be told, mapped to HTTP in one place.

    GatewayError                      500 server_error
    ├── InvalidRequestError           400 invalid_request_error   (bad input; names the param)
    │   ├── ContextLengthExceededError 400 code context_length_exceeded
    │   └── PayloadTooLargeError      413 code payload_too_large  (body over the route's limit)
    ├── UnprocessableError            422 invalid_request_error   (well-formed JSON, wrong types)
    ├── AuthenticationError           401 authentication_error
    ├── PermissionDeniedError         403 permission_error        (residency, model not allowed)
    ├── ModelNotFoundError            404 invalid_request_error   code model_not_found
    ├── NotFoundError                 404 invalid_request_error   code request_not_found
    │   └── RouteNotFoundError        404 code http_404           (no such route on this address)
    ├── ConflictError                 409 invalid_request_error   (Idempotency-Key in use or not replayable)
    ├── RateLimitedError              429 rate_limit_error        + Retry-After
    ├── UnavailableError              503 service_unavailable     + Retry-After (saturated, cold)
    │   └── WorkerFailedError         503 code worker_failed      + Retry-After (the worker crashed or
    │                                                               became unreachable; retries spent)
    ├── DeadlineExceededError         504 timeout                 (queue deadline before dispatch)
    ├── ClientClosedError             499 client_closed           (client went away; nobody reads it)
    └── UpstreamError                 502 upstream_error          code worker_error (the worker answered
                                                                    with an error, or went silent)

Every error carries the ``Ending`` (outcome and code) that metrics and the state store record.
``rejection_error`` maps the scheduler's ``Rejected`` decisions into this tree: the tenant's own
quotas and tier shedding are 429, capacity (no worker, a cold model, predicted SLO miss, full
queue) 503, a
request no GPU type can hold 400, residency 403; each with the reason code and its signals in the
message and ``Retry-After`` from the scheduler's estimate.
The body is OpenAI's: ``{"error": {"type", "code", "message", "param"}}``; on the KServe v2 routes
it is the v2 protocol's ``{"error": "<message>"}`` (what tritonclient parses) with ``type``,
``code`` and ``param`` beside it.
"""

from __future__ import annotations

import math
from typing import Any

from gateway.outcomes import Ending
from scheduling.outcomes import Outcome, Rejected, RejectReason


class GatewayError(Exception):
    status = 500
    type = "server_error"
    code = "internal_error"
    outcome = Outcome.FAILED

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after_s = retry_after_s

    @property
    def ending(self) -> Ending:
        """How a request that fails with this error ends, e.g. ``rejected(invalid_request)``."""
        return Ending(self.outcome, self.code)

    def body(self) -> dict[str, Any]:
        return {"error": {"type": self.type, "code": self.code, "message": self.message,
                          "param": self.param}}

    def kserve_body(self) -> dict[str, Any]:
        return {"error": self.message, "type": self.type, "code": self.code, "param": self.param}

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else {}


class InvalidRequestError(GatewayError):
    status, type, code, outcome = 400, "invalid_request_error", "invalid_request", Outcome.REJECTED


class ContextLengthExceededError(InvalidRequestError):
    code = "context_length_exceeded"


class UnprocessableError(GatewayError):
    status, type, code, outcome = 422, "invalid_request_error", "invalid_type", Outcome.REJECTED


class AuthenticationError(GatewayError):
    status, type, code, outcome = 401, "authentication_error", "invalid_api_key", Outcome.REJECTED


class PermissionDeniedError(GatewayError):
    status, type, code, outcome = 403, "permission_error", "model_not_allowed", Outcome.REJECTED


class ModelNotFoundError(GatewayError):
    status, type, code, outcome = 404, "invalid_request_error", "model_not_found", Outcome.REJECTED


class RateLimitedError(GatewayError):
    status, type, code, outcome = 429, "rate_limit_error", "rate_limited", Outcome.REJECTED


class UnavailableError(GatewayError):
    status, type, code, outcome = 503, "service_unavailable", "pool_saturated", Outcome.REJECTED


class WorkerFailedError(UnavailableError):
    """The worker crashed or became unreachable while it held the request (a transport failure, not
    saturation); the gateway retries such a request elsewhere while it has produced nothing (or, for a
    generation, resumes it), and reports this once its attempts or its deadline are spent."""

    code, outcome = "worker_failed", Outcome.FAILED

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after_s: int | None = 1) -> None:
        super().__init__(message, param=param, code=code, retry_after_s=retry_after_s)


class DeadlineExceededError(GatewayError):
    status, type, code, outcome = 504, "timeout", "deadline_exceeded", Outcome.EXPIRED


class UpstreamError(GatewayError):
    status, type, code, outcome = 502, "upstream_error", "worker_error", Outcome.FAILED


class ConflictError(GatewayError):
    status, type, code, outcome = 409, "invalid_request_error", "conflict", Outcome.REJECTED


class PayloadTooLargeError(InvalidRequestError):
    status, code = 413, "payload_too_large"


class NotFoundError(GatewayError):
    status, type, code, outcome = 404, "invalid_request_error", "request_not_found", Outcome.REJECTED


class RouteNotFoundError(NotFoundError):
    code = "http_404"


class ClientClosedError(GatewayError):
    status, type, code, outcome = 499, "client_closed", "client_closed", Outcome.CANCELLED


_REJECTION_CLASSES: dict[RejectReason, type[GatewayError]] = {
    RejectReason.MAX_CONCURRENT: RateLimitedError,
    RejectReason.REQUESTS_PER_SECOND: RateLimitedError,
    RejectReason.TOKENS_PER_MINUTE: RateLimitedError,
    RejectReason.TIER_SHED: RateLimitedError,
    RejectReason.PREDICTED_SLO_MISS: UnavailableError,
    RejectReason.QUEUE_FULL: UnavailableError,
    RejectReason.NO_WORKER: UnavailableError,
    RejectReason.MODEL_COLD: UnavailableError,
    RejectReason.TOO_LARGE: InvalidRequestError,
    RejectReason.RESIDENCY: PermissionDeniedError,
}
_REJECTION_TEXT = {
    RejectReason.MAX_CONCURRENT: "your tenant has its maximum number of requests in flight",
    RejectReason.REQUESTS_PER_SECOND: "your tenant is over its requests-per-second quota",
    RejectReason.TOKENS_PER_MINUTE: "your tenant is over its tokens-per-minute quota",
    RejectReason.TIER_SHED: "the service is overloaded and sheds your tier first",
    RejectReason.PREDICTED_SLO_MISS: "the request could not start before its deadline",
    RejectReason.QUEUE_FULL: "the gateway's queue is full",
    RejectReason.NO_WORKER: "no ready worker serves this model",
    RejectReason.MODEL_COLD: "the model is scaled to zero and would not be ready before the request's deadline",
    RejectReason.TOO_LARGE: "the request is larger than any worker or quota allows",
    RejectReason.RESIDENCY: "this model is not served in a region your tenant allows",
}


def rejection_error(rejected: Rejected) -> GatewayError:
    """The client-facing error for a scheduler rejection: reason as the code, signals in the message."""
    cls = _REJECTION_CLASSES[rejected.reason]
    retry = rejected.retry_after_s
    retry_s = max(1, math.ceil(retry)) if retry is not None and math.isfinite(retry) else None
    if retry_s is None and cls in (RateLimitedError, UnavailableError):
        retry_s = 1
    message = f"{_REJECTION_TEXT[rejected.reason]}: {rejected.explain()}"
    return cls(message, code=rejected.reason.value, retry_after_s=retry_s)
