"""One error taxonomy for everything a client can be told, mapped to HTTP in one place.

    GatewayError                      500 server_error
    ├── InvalidRequestError           400 invalid_request_error   (bad input; names the param)
    │   └── ContextLengthExceededError 400 code context_length_exceeded
    ├── UnprocessableError            422 invalid_request_error   (well-formed JSON, wrong types)
    ├── AuthenticationError           401 authentication_error
    ├── PermissionDeniedError         403 permission_error        (residency, model not allowed)
    ├── ModelNotFoundError            404 invalid_request_error   code model_not_found
    ├── RateLimitedError              429 rate_limit_error        + Retry-After
    ├── UnavailableError              503 service_unavailable     + Retry-After (saturated, cold)
    ├── DeadlineExceededError         504 timeout                 (queue deadline before dispatch)
    └── UpstreamError                 502 upstream_error          (worker failed after retries)

Every error carries the outcome label that metrics and the state store record.
The body is OpenAI's: ``{"error": {"type", "code", "message", "param"}}``; on the KServe v2 routes
it is the v2 protocol's ``{"error": "<message>"}`` (what tritonclient parses) with ``type``,
``code`` and ``param`` beside it.
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    status = 500
    type = "server_error"
    code = "internal_error"
    outcome = "failed"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 retry_after_s: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after_s = retry_after_s

    @property
    def outcome_label(self) -> str:
        """Low-cardinality outcome, e.g. ``rejected(invalid_request)``."""
        return f"{self.outcome}({self.code})"

    def body(self) -> dict[str, Any]:
        return {"error": {"type": self.type, "code": self.code, "message": self.message,
                          "param": self.param}}

    def kserve_body(self) -> dict[str, Any]:
        return {"error": self.message, "type": self.type, "code": self.code, "param": self.param}

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else {}


class InvalidRequestError(GatewayError):
    status, type, code, outcome = 400, "invalid_request_error", "invalid_request", "rejected"


class ContextLengthExceededError(InvalidRequestError):
    code = "context_length_exceeded"


class UnprocessableError(GatewayError):
    status, type, code, outcome = 422, "invalid_request_error", "invalid_type", "rejected"


class AuthenticationError(GatewayError):
    status, type, code, outcome = 401, "authentication_error", "invalid_api_key", "rejected"


class PermissionDeniedError(GatewayError):
    status, type, code, outcome = 403, "permission_error", "model_not_allowed", "rejected"


class ModelNotFoundError(GatewayError):
    status, type, code, outcome = 404, "invalid_request_error", "model_not_found", "rejected"


class RateLimitedError(GatewayError):
    status, type, code, outcome = 429, "rate_limit_error", "rate_limited", "rejected"


class UnavailableError(GatewayError):
    status, type, code, outcome = 503, "service_unavailable", "pool_saturated", "rejected"


class DeadlineExceededError(GatewayError):
    status, type, code, outcome = 504, "timeout", "deadline_exceeded", "expired"


class UpstreamError(GatewayError):
    status, type, code, outcome = 502, "upstream_error", "worker_failed", "failed"


class PayloadTooLargeError(InvalidRequestError):
    status, code = 413, "payload_too_large"
