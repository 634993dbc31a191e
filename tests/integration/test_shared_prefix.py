"""Requests that share a long system prompt on the real stack: the gateway predicts what the
engine's prefix cache holds (``scheduling.prediction.prefix_reuse``), and the engine copies a running
sequence's prefix (``python_backends.chat.scheduler``), so a burst is admitted and computes the
shared prompt once. With every prompt predicted at full length (1,000 tokens at the ``cpu``
profile's 320 tokens/s: 3.2 s of premium's 4 s), all but the first of such a burst were refused."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.integration.conftest import KEYS, RunningStack, worker_counter

pytestmark = pytest.mark.integration
SYSTEM = " ".join(["You are a careful assistant for a railway company."] * 90)  # about 1,000 tokens
HITS = ("shunter_llm_prefix_hit_tokens_total", {"model": "chat"})


async def _ask(client: httpx.AsyncClient, question: str) -> tuple[int, str]:
    body = {"model": "chat", "max_tokens": 8, "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
    response = await client.post("/v1/chat/completions", json=body)
    return response.status_code, response.text


async def _burst(url: str, burst: int) -> list[tuple[int, str]]:
    async with httpx.AsyncClient(base_url=url, timeout=120.0,
                                 headers={"Authorization": f"Bearer {KEYS['premium']}"}) as client:
        return list(await asyncio.gather(*(_ask(client, f"What is {n} plus {n}?") for n in range(burst))))


def _warm_up(stack: RunningStack) -> int:
    """The system prompt alone, once (the engine computes it); its prompt tokens."""
    response = httpx.post(f"{stack.url}/v1/chat/completions", timeout=120.0,
                          headers={"Authorization": f"Bearer {KEYS['premium']}"},
                          json={"model": "chat", "max_tokens": 1, "messages": [{"role": "system", "content": SYSTEM}]})
    assert response.status_code == 200, response.text
    return int(response.json()["usage"]["prompt_tokens"])


def test_a_burst_sharing_a_long_system_prompt_is_admitted_and_reuses_the_prompt(stack: RunningStack) -> None:
    shared = _warm_up(stack) - 16  # the system turn, less a block: what every later prompt shares at least
    hits_before = worker_counter(stack, *HITS)
    results = asyncio.run(_burst(stack.url, 8))
    assert [status for status, _ in results] == [200] * 8, results
    deadline = time.monotonic() + 15.0  # the engine publishes its counters between steps
    while worker_counter(stack, *HITS) - hits_before < 8 * shared and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_counter(stack, *HITS) - hits_before >= 8 * shared
