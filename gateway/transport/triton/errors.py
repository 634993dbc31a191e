"""The one translation of Triton's errors into the gateway's taxonomy (``gateway.errors``)."""

from __future__ import annotations

from tritonclient.utils import InferenceServerException

from gateway.errors import GatewayError, InvalidRequestError, UnavailableError, UpstreamError, WorkerFailedError

# Prefix of the messages our python backends raise for bad input (python_backends.batching).
_INVALID_INPUT_PREFIX = "input '"


def model_label(model: str, version: int | None) -> str:
    """How messages name what was called: ``model embed v3`` (or ``model embed`` without a version)."""
    return f"model {model}" if version is None else f"model {model} v{version}"


def map_triton_error(exc: InferenceServerException, model: str, version: int | None = None) -> GatewayError:
    """Bad input -> 400 ``invalid_input``; a full queue -> 503 ``pool_saturated``; a worker that
    crashed or cannot be reached (gRPC ``UNAVAILABLE`` without Triton's queue wording) -> 503
    ``worker_failed`` (retryable: ``WorkerFailedError``); a model not loaded -> 503
    ``model_cold``; anything else -> 502 ``worker_error``. Every message names the model version
    called (``model embed v3``), so that during a canary or A/B test the failing side is named; the
    worker's own message stays out of the client's body (it may carry the backend's internals)."""
    name = model_label(model, version)
    message = exc.message() or str(exc)
    status = exc.status() or ""
    if _INVALID_INPUT_PREFIX in message or "INVALID_ARGUMENT" in status:
        detail = message[message.find(_INVALID_INPUT_PREFIX):] if _INVALID_INPUT_PREFIX in message else message
        return InvalidRequestError(detail, code="invalid_input")
    if "queue size" in message.lower() or "RESOURCE_EXHAUSTED" in status:
        return UnavailableError(f"{name} is saturated; retry shortly", retry_after_s=1)
    if "UNAVAILABLE" in status:
        return WorkerFailedError(f"the worker serving {name} failed or cannot be reached")
    if "NOT_FOUND" in status or "not ready" in message.lower() or "unknown model" in message.lower():
        return UnavailableError(f"{name} is not loaded on any ready worker",
                                code="model_cold", retry_after_s=5)
    return UpstreamError(f"worker failed serving {name}")
