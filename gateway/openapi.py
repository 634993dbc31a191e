"""The documented contract: every status code each route answers, with the error body's schema.

Routers declare their statuses with ``errors(...)`` (or ``kserve_errors(...)`` on the KServe v2
routes, whose body is the v2 protocol's); the OpenAPI document at ``/openapi.json`` then lists,
for every operation, each status it can answer (400, 401, 403, 404, 409, 413, 422, 429, 500,
502, 503, 504 as they apply) with the schema of its body and the headers that come with it
(``x-request-id`` always, ``Retry-After`` on 429 and 503). The fuzzer
(tests/integration/test_openapi_fuzz.py) holds the gateway to this document.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    type: str
    code: str
    message: str
    param: str | None


class ErrorBody(BaseModel):
    """OpenAI's error body, on every route but KServe v2's."""

    error: ErrorDetail


class KServeErrorBody(BaseModel):
    """The KServe v2 error body (``error`` is the message, what tritonclient reads)."""

    error: str
    type: str
    code: str
    param: str | None


_WHEN = {
    400: "Bad input: invalid JSON, a missing parameter, a value out of range, a prompt over the context, "
         "too many inputs or tokens",
    401: "Missing or unknown API key",
    403: "The tenant may not use this model, or no allowed region serves it",
    404: "Unknown model or request id",
    409: "A request with this Idempotency-Key is still running, or was streamed",
    413: "The request body is larger than the route's limit",
    422: "A value of the wrong JSON type; an Idempotency-Key reused with another body",
    429: "The tenant's quota, or its tier shed under overload (with Retry-After)",
    500: "An internal error; x-request-id identifies it in the gateway's log",
    502: "The worker failed",
    503: "No capacity: predicted to miss its deadline, queue full, no ready worker (with Retry-After)",
    504: "The queue deadline passed before the request was dispatched",
}
_REQUEST_ID = {"x-request-id": {"description": "The request's id", "schema": {"type": "string"}}}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "string"}}}

INFERENCE = (400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503, 504)
READ = (400, 401, 500)  # 400: a malformed Idempotency-Key header
METADATA = (*READ, 403, 404, 422, 502, 503)


def _responses(statuses: tuple[int, ...], model: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        headers = {**_REQUEST_ID, **(_RETRY_AFTER if status in (429, 503) else {})}
        responses[status] = {"model": model, "description": _WHEN[status], "headers": headers}
    return responses


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of an OpenAI-style route that can answer ``statuses``."""
    return _responses(statuses, ErrorBody)


def kserve_errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a KServe v2 route that can answer ``statuses``."""
    return _responses(statuses, KServeErrorBody)


def streamed_or_json() -> dict[int | str, dict[str, Any]]:
    """A 200 that is JSON, or an SSE stream when the body asks ``stream: true``."""
    return {200: {"description": "The result; with stream: true, server-sent events ending in [DONE]",
                  "content": {"application/json": {}, "text/event-stream": {"schema": {"type": "string"}}}}}


def not_ready() -> dict[int | str, dict[str, Any]]:
    """KServe v2 readiness: 400 with ``{"ready": false}`` (and the model's name) when not ready."""
    readiness = {"type": "object", "properties": {"ready": {"type": "boolean"}, "name": {"type": "string"}},
                 "required": ["ready"]}
    error = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
    return {400: {"description": "Not ready (or a malformed header: the KServe error body)",
                  "content": {"application/json": {"schema": {"anyOf": [readiness, error]}}}}}
