"""Response routing under concurrency, cancellation of an abandoned stream, and the reuse of gRPC
generation streams, on the real stack."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest

from tests.integration.conftest import KEYS, RunningStack, metric_sum, stream_chat, worker_counter

pytestmark = pytest.mark.integration
TOPICS = ["trains", "the sea", "autumn", "coffee", "mountains", "a cat", "the moon", "bread", "rain", "music",
          "a library", "winter", "bees", "a lighthouse", "chess", "the desert"]


async def _stream_text(client: httpx.AsyncClient, topic: str) -> str:
    return (await stream_chat(client, f"Write one sentence about {topic}.", 24))[0]


async def _run_streams(url: str, topics: list[str], concurrently: bool) -> list[str]:
    headers = {"Authorization": f"Bearer {KEYS['premium']}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as client:
        if concurrently:
            return list(await asyncio.gather(*(_stream_text(client, t) for t in topics)))
        return [await _stream_text(client, t) for t in topics]


def test_sixteen_concurrent_streams_each_get_their_own_output(stack: RunningStack) -> None:
    solo = asyncio.run(_run_streams(stack.url, TOPICS, concurrently=False))
    together = asyncio.run(_run_streams(stack.url, TOPICS, concurrently=True))
    assert len(set(solo)) == len(TOPICS)  # different prompts, different answers
    identical = sum(a == b for a, b in zip(solo, together, strict=True))
    assert identical == len(TOPICS), list(zip(solo, together, strict=True))


CANCELLED = {"finish_reason": "cancelled", "model": "chat"}


def _wait_for_one_more_cancellation(stack: RunningStack, before: float, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if worker_counter(stack, "shunter_llm_requests_finished_total", CANCELLED) > before:
            break
        time.sleep(0.2)
    assert worker_counter(stack, "shunter_llm_requests_finished_total", CANCELLED) == before + 1


def test_client_disconnect_cancels_generation_in_the_model(stack: RunningStack) -> None:
    cancelled_before = worker_counter(stack, "shunter_llm_requests_finished_total", CANCELLED)
    tokens_before = worker_counter(stack, "shunter_llm_generated_tokens_total", {"model": "chat"})
    body = {"model": "chat", "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
            "max_tokens": 3000, "temperature": 0.8, "stream": True}
    with stack.client() as client, client.stream("POST", "/v1/chat/completions", json=body) as response:
        received = 0
        for line in response.iter_lines():
            received += line.startswith("data: {")
            if received >= 5:
                break  # leaving the block closes the connection mid-stream
    _wait_for_one_more_cancellation(stack, cancelled_before)
    generated = worker_counter(stack, "shunter_llm_generated_tokens_total", {"model": "chat"}) - tokens_before
    assert generated < 300  # stopped long before max_tokens


def test_client_disconnect_cancels_a_non_streamed_generation_too(stack: RunningStack) -> None:
    cancelled_before = worker_counter(stack, "shunter_llm_requests_finished_total", CANCELLED)
    body = {"model": "chat", "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
            "max_tokens": 3000, "temperature": 0.8}
    with stack.client(timeout_s=1.5) as client, contextlib.suppress(httpx.TimeoutException):
        client.post("/v1/chat/completions", json=body)  # gives up after 1.5 s and closes the connection
    _wait_for_one_more_cancellation(stack, cancelled_before)


def _gateway_streams(stack: RunningStack, state: str) -> float:
    return metric_sum(f"{stack.url}/metrics", "shunter_worker_generation_streams", {"state": state})


def test_generations_one_after_another_reuse_one_grpc_stream(stack: RunningStack) -> None:
    """Triton keeps memory per gRPC stream served (gateway/transport/triton/streams.py), so a stream
    whose generation ended carries the next one; one whose client left is closed, not reused."""
    asyncio.run(_run_streams(stack.url, TOPICS[:2], concurrently=False))  # at least one idle stream
    opened = _gateway_streams(stack, "opened")
    texts = asyncio.run(_run_streams(stack.url, TOPICS[:6], concurrently=False))
    assert len(set(texts)) == 6
    assert _gateway_streams(stack, "opened") == opened
    assert _gateway_streams(stack, "idle") >= 1

    cancelled_before = worker_counter(stack, "shunter_llm_requests_finished_total", CANCELLED)
    body = {"model": "chat", "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
            "max_tokens": 3000, "temperature": 0.8, "stream": True}
    with stack.client() as client, client.stream("POST", "/v1/chat/completions", json=body) as response:
        for received, line in enumerate(response.iter_lines()):
            if line.startswith("data: {") and received >= 3:
                break
    _wait_for_one_more_cancellation(stack, cancelled_before)
    assert asyncio.run(_run_streams(stack.url, TOPICS[6:8], concurrently=False)) == \
        asyncio.run(_run_streams(stack.url, TOPICS[6:8], concurrently=False))  # served, and as before
