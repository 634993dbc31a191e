"""The gateway chat client's reading of an SSE stream and of a refusal (the HTTP side is a
canned response: what is under test is the client's parsing)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from bench.chat import GatewayChat
from bench.clients import RefusedResponse

ROLE = 'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}'
TEXT = 'data: {"choices": [{"index": 0, "delta": {"content": "Four"}}]}'
USAGE = 'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}'


def _stream(response: httpx.Response) -> object:
    async def run() -> object:
        transport = httpx.MockTransport(lambda request: response)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            return await GatewayChat(http, system="A long shared system prompt.").stream()
    return asyncio.run(run())


def test_the_first_token_is_the_first_chunk_with_text_not_the_opening_role_chunk() -> None:
    body = "\n\n".join([ROLE, ": ping", TEXT, TEXT, USAGE, "data: [DONE]"]) + "\n\n"
    timing = _stream(httpx.Response(200, text=body, headers={"content-type": "text/event-stream"}))
    assert timing.chunks == 2 and timing.completion_tokens == 3  # type: ignore[attr-defined]


def test_a_refusal_carries_its_status_and_the_error_bodys_code() -> None:
    body = {"error": {"code": "predicted_slo_miss", "message": "...", "type": "overloaded", "param": None}}
    with pytest.raises(RefusedResponse) as refused:
        _stream(httpx.Response(503, json=body, headers={"Retry-After": "3"}))
    assert (refused.value.status, refused.value.code, refused.value.retry_after_s) == (503, "predicted_slo_miss", 3.0)
    with pytest.raises(RefusedResponse) as plain:
        _stream(httpx.Response(502, text="<html>bad gateway</html>", headers={"Retry-After": "soon"}))
    assert (plain.value.status, plain.value.code, plain.value.retry_after_s) == (502, None, None)
