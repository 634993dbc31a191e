"""Hostile input on the real stack: bodies refused while read and after the key, values checked
before any work, every error with a request id and a log line, bounded metric labels, the
documented contract (405 Allow, JSON health), the model repository under the state dir."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import KEYS, RunningStack

pytestmark = pytest.mark.integration
MIB = 1 << 20
CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def _chunks(total_bytes: int, sent: list[int], chunk_bytes: int = 256 * 1024) -> Iterator[bytes]:
    while sent[0] < total_bytes:
        sent[0] += chunk_bytes
        yield b" " * chunk_bytes


def _error(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["x-request-id"].startswith("req_")
    body = response.json()
    error: dict[str, object] = body["error"] if isinstance(body["error"], dict) else body
    assert error["code"] == code, body
    return error


def test_a_50_mb_body_is_refused_early_and_the_stack_keeps_serving(stack: RunningStack) -> None:
    with stack.client(timeout_s=60) as client:
        started = time.monotonic()
        declared = client.post("/v1/chat/completions", content=b" " * (50 * MIB),
                               headers={"content-type": "application/json"})
        _error(declared, 413, "payload_too_large")
        sent = [0]
        streamed = client.post("/v1/embeddings", content=_chunks(50 * MIB, sent),
                               headers={"content-type": "application/json"})
        _error(streamed, 413, "payload_too_large")
        assert time.monotonic() - started < 30  # refused, not parsed (it took 40 s and more before)
    with httpx.Client(base_url=stack.url, timeout=60) as anonymous:
        _error(anonymous.post("/v1/embeddings", content=b" " * (50 * MIB)), 401, "invalid_api_key")
    with stack.client(KEYS["premium"]) as client:
        assert client.post("/v1/embeddings", json={"model": "embed", "input": "still here"}).status_code == 200


async def test_a_premium_embedding_is_served_while_50_mb_bodies_arrive(stack: RunningStack) -> None:
    headers = {"Authorization": f"Bearer {KEYS['batch']}", "content-type": "application/json"}

    async def attack(client: httpx.AsyncClient) -> int:
        response = await client.post("/v1/embeddings", content=b"[" * (50 * MIB), headers=headers)
        return response.status_code

    async with httpx.AsyncClient(base_url=stack.url, timeout=120) as client:
        attacks = [asyncio.ensure_future(attack(client)) for _ in range(3)]
        premium = await client.post("/v1/embeddings", json={"model": "embed", "input": "a premium request"},
                                    headers={"Authorization": f"Bearer {KEYS['premium']}"})
        assert premium.status_code == 200
        assert await asyncio.gather(*attacks) == [413, 413, 413]


@pytest.mark.parametrize(("path", "body", "param"), [
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "\ud800"}]}, "messages.0.content"),
    ("/v1/embeddings", {"model": "embed", "input": ["ok", "\ud800"]}, "input"),
    ("/v1/chat/completions", {**CHAT, "seed": 2**70}, "seed"),
    ("/v1/chat/completions", {**CHAT, "top_p": 5e-324}, "top_p"),
    ("/v1/chat/completions", {**CHAT, "top_k": 2**40}, "top_k"),
])
def test_valid_json_with_bad_values_is_a_clear_400(stack: RunningStack, path: str, body: dict[str, object],
                                                   param: str) -> None:
    with stack.client() as client:
        response = client.post(path, content=json.dumps(body).encode(),  # ASCII: "\ud800" stays an escape
                               headers={"content-type": "application/json"})
        error = _error(response, 400, "invalid_value")
        assert str(error["param"]).startswith(param)


def test_json_with_too_many_values_is_refused_before_parsing(stack: RunningStack) -> None:
    body = b'{"model": "chat", "messages": [' + b'{"role": "user", "content": "a"},' * 120_000 + b"{}]}"
    with stack.client() as client:
        _error(client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"}),
               400, "too_many_values")


def test_errors_carry_a_request_id_and_leave_one_log_line(stack: RunningStack) -> None:
    with stack.client() as client:
        response = client.post("/v1/chat/completions", json={**CHAT, "model": "no-such-model"})
    _error(response, 404, "model_not_found")
    request_id = response.headers["x-request-id"]
    log = stack.paths.logs / "gateway.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and request_id not in log.read_text():
        time.sleep(0.1)
    lines = [line for line in log.read_text().splitlines() if request_id in line]
    assert len(lines) == 1 and "404" in lines[0] and "model_not_found" in lines[0], lines


def test_the_documented_contract(stack: RunningStack) -> None:
    with stack.client() as client:
        wrong_method = client.get("/v1/embeddings")
        assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
        assert wrong_method.headers["x-request-id"].startswith("req_")
        assert client.get("/v2/health/live").json() == {"live": True}
        assert client.get("/v2/health/ready").json() == {"ready": True}
        document = client.get("/openapi.json").json()
    responses = document["paths"]["/v1/embeddings"]["post"]["responses"]
    assert {"400", "401", "403", "404", "413", "422", "429", "503", "504"} <= set(responses)


def _series(url: str) -> int:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


async def test_invented_model_names_do_not_grow_the_metrics(stack: RunningStack) -> None:
    before = _series(stack.url)
    headers = {"Authorization": f"Bearer {KEYS['standard']}"}
    limits = httpx.Limits(max_connections=16)
    statuses: list[int] = []
    async with httpx.AsyncClient(base_url=stack.url, timeout=60, limits=limits, headers=headers) as client:
        async def send(first: int) -> None:
            for i in range(first, 10_000, 16):
                response = await client.post("/v1/embeddings", json={"model": f"invented-{i}", "input": "x"})
                statuses.append(response.status_code)

        await asyncio.gather(*(send(first) for first in range(16)))
    assert len(statuses) == 10_000 and set(statuses) == {404}
    after = _series(stack.url)
    assert after - before < 50, (before, after)
    text = httpx.get(f"{stack.url}/metrics", timeout=10).text
    assert "invented-" not in text and 'model="unknown"' in text


def test_the_model_repository_lives_under_the_state_dir(stack: RunningStack) -> None:
    repository = stack.paths.state_dir / "model_repository"
    assert stack.paths.repository == repository
    assert (repository / "embed" / "config.pbtxt").exists()
    assert stack.stack.supervisor is not None
    assert all(f"--model-repository={repository}" in worker.command() for worker in stack.stack.supervisor.workers)
