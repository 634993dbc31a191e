from gateway.errors import (
    ContextLengthExceededError,
    GatewayError,
    ModelNotFoundError,
    RateLimitedError,
    UnavailableError,
)


def test_error_body_is_the_openai_shape() -> None:
    error = ContextLengthExceededError("too long", param="messages")
    assert error.status == 400
    assert error.body() == {"error": {"type": "invalid_request_error", "code": "context_length_exceeded",
                                      "message": "too long", "param": "messages"}}
    assert error.ending.label == "rejected(context_length_exceeded)"


def test_retryable_errors_carry_retry_after() -> None:
    assert UnavailableError("busy", retry_after_s=3).headers() == {"Retry-After": "3"}
    assert RateLimitedError("slow down", retry_after_s=1).status == 429
    assert ModelNotFoundError("x").headers() == {}


def test_every_error_class_has_a_distinct_status_or_code() -> None:
    classes = [c for c in _all_subclasses(GatewayError)]
    keys = {(c.status, c.code) for c in classes}
    assert len(keys) == len(classes)


def _all_subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found
