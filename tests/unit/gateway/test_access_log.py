"""The gateway's access log in-process: one JSON line per request, with who, where and how it ended,
and never a prompt, an output or a key."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.unit.gateway.conftest import BATCH, PREMIUM, STANDARD, InProcessGateway

SECRET_PROMPT = "the launch code is swordfish-7731"
CHAT = {"model": "chat", "messages": [{"role": "user", "content": SECRET_PROMPT}]}


def _lines(gw: InProcessGateway) -> list[dict[str, Any]]:
    text = (gw.logs / "gateway.access.jsonl").read_text()
    return [orjson.loads(line) for line in text.splitlines()]


async def test_a_completed_chat_leaves_one_line_with_where_it_ran_and_its_timings(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    assert response.status_code == 200
    (line,) = _lines(gw)
    assert line["request_id"] == response.headers["x-request-id"]
    assert line["route"] == "/v1/chat/completions" and line["method"] == "POST" and line["status"] == 200
    assert line["outcome"] == "completed" and "reason" not in line
    assert line["tenant"] == "demo-standard" and line["tier"] == "standard"
    assert line["model"] == "chat" and line["version"] == 1
    assert line["pool"] == "local-cpu" and line["worker"] == "local-cpu-0" and line["attempts"] == 1
    assert line["tokens_in"] > 0 and line["tokens_out"] == 4
    assert line["queue_wait_ms"] >= 0 and line["ttft_ms"] >= 0 and line["duration_ms"] >= line["ttft_ms"]
    assert line["ts"].endswith("Z")


async def test_a_refused_request_logs_its_reason_code(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/embeddings", headers={"Authorization": "Bearer wrong-key"},
                                    json={"model": "embed", "input": "x"})
    assert response.status_code == 401
    (line,) = _lines(gw)
    assert line["status"] == 401 and line["outcome"] == "rejected" and line["reason"] == "invalid_api_key"
    assert "tenant" not in line


async def test_an_unexpected_exception_still_leaves_a_line_naming_where_it_was_raised(
        gw: InProcessGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: object, **kwargs: object) -> object:
        raise ZeroDivisionError("payload text must not be logged")

    monkeypatch.setattr(gw.workers, "infer_rows", broken)
    response = await gw.client.post("/v1/embeddings", headers=PREMIUM, json={"model": "embed", "input": "a cat"})
    assert response.status_code == 500
    (line,) = _lines(gw)
    assert line["status"] == 500 and line["outcome"] == "failed" and line["reason"] == "internal_error"
    assert line["request_id"] == response.headers["x-request-id"]
    assert "ZeroDivisionError" in line["error"] and "payload text" not in line["error"]


async def test_the_log_holds_no_prompt_output_or_key(gw: InProcessGateway) -> None:
    await gw.client.post("/v1/chat/completions", headers=PREMIUM, json=CHAT)
    await gw.client.post("/v1/embeddings", headers=BATCH, json={"model": "embed", "input": [SECRET_PROMPT]})
    await gw.client.post("/v1/chat/completions", headers={"Authorization": "Bearer sk-not-a-real-key-123"}, json=CHAT)
    text = (gw.logs / "gateway.access.jsonl").read_text()
    assert len(text.splitlines()) == 3
    for secret in ("swordfish", "Paris is the capital", "demo-premium-key", "demo-batch-key", "sk-not-a-real"):
        assert secret not in text


async def test_scrapes_and_probes_leave_no_line(gw: InProcessGateway) -> None:
    for path in ("/metrics", "/healthz"):
        assert (await gw.client.get(path)).status_code == 200
    assert not (gw.logs / "gateway.access.jsonl").read_text()
