"""How Triton's errors map onto the gateway's taxonomy (gateway.transport.triton.errors.map_triton_error)."""

from tritonclient.utils import InferenceServerException

from gateway.errors import InvalidRequestError, UnavailableError, UpstreamError, WorkerFailedError
from gateway.transport.triton.errors import map_triton_error
from python_backends.batching import InvalidInputError
from python_backends.chat.engine import EngineSaturatedError


def test_a_full_engine_queue_is_a_retryable_503_like_a_full_triton_queue() -> None:
    for message in (str(EngineSaturatedError(64)), "Exceeds maximum queue size"):
        error = map_triton_error(InferenceServerException(message), "chat")
        assert isinstance(error, UnavailableError)
        assert error.status == 503 and error.headers() == {"Retry-After": "1"}


def test_a_backend_input_error_is_a_400_naming_the_input() -> None:
    error = map_triton_error(InferenceServerException(str(InvalidInputError("prompt", "is empty"))), "chat")
    assert isinstance(error, InvalidRequestError) and "prompt" in str(error)


def test_an_unreachable_or_crashed_worker_is_worker_failed_not_saturation() -> None:
    crashed = InferenceServerException("stream failed: Socket closed", status="StatusCode.UNAVAILABLE")
    error = map_triton_error(crashed, "embed")
    assert isinstance(error, WorkerFailedError)
    assert (error.status, error.code, error.ending.label) == (503, "worker_failed", "failed(worker_failed)")
    assert error.headers() == {"Retry-After": "1"}
    full = map_triton_error(InferenceServerException("Exceeds maximum queue size", status="StatusCode.UNAVAILABLE"),
                            "embed")
    assert not isinstance(full, WorkerFailedError) and full.code == "pool_saturated"


def test_anything_else_is_a_worker_error() -> None:
    error = map_triton_error(InferenceServerException("generation failed: boom"), "chat")
    assert isinstance(error, UpstreamError) and (error.status, error.code) == (502, "worker_error")


def test_a_worker_error_names_the_model_version_that_failed() -> None:
    error = map_triton_error(InferenceServerException("Traceback ... ValueError: weights"), "embed", 3)
    assert isinstance(error, UpstreamError)
    assert error.body()["error"]["message"] == "worker failed serving model embed v3"
    assert error.body()["error"]["code"] == "worker_error"
    cold = map_triton_error(InferenceServerException("model not ready", status="StatusCode.NOT_FOUND"), "embed", 4)
    assert "model embed v4" in str(cold)
