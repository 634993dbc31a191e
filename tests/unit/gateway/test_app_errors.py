"""Every error leaves the gateway in the documented body, with its status and the request id."""

from __future__ import annotations

import pytest

from tests.unit.gateway.conftest import STANDARD, InProcessGateway

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(("headers", "body", "status", "code"), [
    ({}, CHAT, 401, "invalid_api_key"),
    ({"Authorization": "Bearer not-a-key"}, CHAT, 401, "invalid_api_key"),
    (STANDARD, {**CHAT, "model": "nope"}, 404, "model_not_found"),
    (STANDARD, {**CHAT, "model": "embed"}, 400, "model_not_supported"),
    (STANDARD, {"model": "chat"}, 400, "missing_parameter"),
    (STANDARD, {**CHAT, "temperature": "hot"}, 422, "invalid_type"),
    ({**STANDARD, "X-Deadline-Ms": "soon"}, CHAT, 400, "invalid_request"),
    ({**STANDARD, "Idempotency-Key": "k" * 256}, CHAT, 400, "invalid_request"),
])
async def test_bad_requests_get_the_openai_error_body(gw: InProcessGateway, headers: dict[str, str],
                                                      body: dict[str, object], status: int, code: str) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=headers, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and set(error) == {"type", "code", "message", "param"}
    assert response.headers["x-request-id"].startswith("req_")
    assert gw.workers.generations == []


async def test_a_body_that_is_not_json_is_400_invalid_json(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/chat/completions", headers={**STANDARD, "content-type": "application/json"},
                                    content=b"{not json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


async def test_an_unknown_route_is_404_in_the_same_body(gw: InProcessGateway) -> None:
    response = await gw.client.get("/v1/nothing-here", headers=STANDARD)
    assert response.status_code == 404 and response.json()["error"]["code"] == "http_404"
