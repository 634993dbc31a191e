"""Bad input gets a clear 4xx in the OpenAI error body, with a request id; never a 500."""

from __future__ import annotations

import pytest

from tests.integration.conftest import RunningStack

pytestmark = pytest.mark.integration
CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def _assert_error(response, status: int, code: str | None = None, param: str | None = None) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    body = response.json()
    if response.url.path.startswith("/v2/"):  # the KServe v2 shape: "error" is the message
        message = body.pop("error")
        error = {**body, "message": message}
    else:
        error = body["error"]
    assert set(error) == {"type", "code", "message", "param"}
    assert error["message"]
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    assert response.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize(("path", "body", "status", "code", "param"), [
    ("/v1/chat/completions", {**CHAT, "model": "gpt-9"}, 404, "model_not_found", "model"),
    ("/v1/embeddings", {"model": "nope", "input": "x"}, 404, "model_not_found", "model"),
    ("/v1/chat/completions", {**CHAT, "temperature": "hot"}, 422, "invalid_type", "temperature"),
    ("/v1/chat/completions", {**CHAT, "messages": "hello"}, 422, "invalid_type", "messages"),
    ("/v1/chat/completions", {"model": "chat"}, 400, "missing_parameter", "messages"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 0}, 400, "invalid_value", "max_tokens"),
    ("/v1/chat/completions", {**CHAT, "n": 2}, 400, None, "n"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "word " * 5000}]},
     400, "context_length_exceeded", "messages"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 100000}, 400, "context_length_exceeded", "messages"),
    ("/v1/completions", {"model": "chat", "prompt": "a", "echo": True}, 400, None, "echo"),
    ("/v1/embeddings", {"model": "chat", "input": "x"}, 400, "model_not_supported", "model"),
    ("/v1/embeddings", {"model": "embed", "input": "word " * 600}, 400, "context_length_exceeded", "input"),
    ("/v1/embeddings", {"model": "embed", "input": []}, 400, "invalid_value", "input"),
    ("/v1/rerank", {"model": "rerank", "query": "", "documents": ["a"]}, 400, "invalid_value", "query"),
    ("/v1/rerank", {"model": "rerank", "query": "q", "documents": []}, 400, "invalid_value", "documents"),
    ("/v2/models/tabular/infer", {"inputs": [{"name": "features", "datatype": "FP32", "shape": [1, 3],
                                              "data": [1, 2, 3]}]}, 400, "invalid_input", None),
    ("/v2/models/vision/infer", {"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1, 1],
                                             "data": ["not an image"]}]}, 400, "invalid_input", None),
    ("/v2/models/tabular/infer", {"inputs": "x"}, 400, None, "inputs"),
])
def test_bad_input_gets_a_clear_error(stack: RunningStack, path: str, body: object, status: int,
                                      code: str | None, param: str | None) -> None:
    with stack.client() as client:
        _assert_error(client.post(path, json=body), status, code, param)


def test_malformed_json_is_a_400(stack: RunningStack) -> None:
    with stack.client() as client:
        response = client.post("/v1/chat/completions", content=b'{"model": "chat", "messages": [',
                               headers={"content-type": "application/json"})
        _assert_error(response, 400, "invalid_json")
        _assert_error(client.post("/v2/models/tabular/infer", content=b"{oops"), 400, "invalid_json")


def test_bad_or_missing_key_is_a_401(stack: RunningStack) -> None:
    with stack.client(key="not-a-key") as client:
        _assert_error(client.post("/v1/chat/completions", json=CHAT), 401, "invalid_api_key")
        _assert_error(client.get("/v1/models", headers={"Authorization": ""}), 401)


def test_unknown_route_uses_the_error_body(stack: RunningStack) -> None:
    with stack.client() as client:
        _assert_error(client.get("/v1/nothing-here"), 404)


def test_the_stack_keeps_serving_after_bad_input(stack: RunningStack) -> None:
    with stack.client() as client:
        for _ in range(3):
            client.post("/v2/models/vision/infer", json={"inputs": [{"name": "image", "datatype": "BYTES",
                                                                     "shape": [1, 1], "data": ["junk"]}]})
        response = client.post("/v1/embeddings", json={"model": "embed", "input": "still fine"})
        assert response.status_code == 200


def test_every_response_has_a_request_id_and_idempotency_key_is_accepted(stack: RunningStack) -> None:
    with stack.client() as client:
        first = client.post("/v1/embeddings", json={"model": "embed", "input": "x"}, headers={"Idempotency-Key": "k-1"})
        second = client.post("/v1/embeddings", json={"model": "embed", "input": "x"})
        assert first.status_code == 200
        assert first.headers["x-request-id"] != second.headers["x-request-id"]
        assert len(first.headers["x-request-id"]) >= 24
