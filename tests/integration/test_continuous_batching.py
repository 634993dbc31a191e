"""Continuous batching in the chat model, through the real gateway and Triton."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from bench.triton_stats import engine_busy, engine_counters
from tests.integration.conftest import KEYS, RunningStack, stream_chat

pytestmark = pytest.mark.integration
REQUESTS = [(f"Write about {topic}.", max_tokens) for topic, max_tokens in zip(
    ["trains", "the sea", "autumn", "coffee", "mountains", "a cat", "the moon", "bread", "rain", "music",
     "a library", "winter", "bees", "a lighthouse", "chess", "the desert"],
    [8, 96, 16, 64, 24, 120, 12, 80, 40, 100, 20, 72, 32, 110, 48, 88], strict=True)]


async def _run(url: str, concurrently: bool) -> list[tuple[str, str | None]]:
    headers = {"Authorization": f"Bearer {KEYS['standard']}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as client:
        if concurrently:
            return list(await asyncio.wait_for(
                asyncio.gather(*(stream_chat(client, c, n) for c, n in REQUESTS)), 300))
        return [await stream_chat(client, c, n) for c, n in REQUESTS]


def _metric(stack: RunningStack, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{stack.worker.metrics_port}/metrics", timeout=10).text
    match = re.search(rf'^{name}{{[^}}]*model="chat"[^}}]*}} ([0-9.e+]+)$', text, re.MULTILINE)
    assert match, f"{name} is not exported"
    return float(match.group(1))


def _wait_for(stack: RunningStack, name: str, value: float, timeout_s: float = 20.0) -> float:
    deadline = time.monotonic() + timeout_s
    while (seen := _metric(stack, name)) != value and time.monotonic() < deadline:
        time.sleep(0.2)
    return seen


def test_sixteen_mixed_streams_complete_each_as_alone_and_free_the_kv_pool(stack: RunningStack) -> None:
    solo = asyncio.run(_run(stack.url, concurrently=False))
    decoded_before = _metric(stack, "shunter_llm_decode_tokens_total")
    together = asyncio.run(_run(stack.url, concurrently=True))
    assert all(finish in ("stop", "length") for _, finish in together)
    assert [text for text, _ in together] == [text for text, _ in solo]
    assert _wait_for(stack, "shunter_llm_kv_blocks_used", 0.0) == 0.0
    assert _wait_for(stack, "shunter_llm_running_sequences", 0.0) == 0.0
    assert _metric(stack, "shunter_llm_waiting_sequences") == 0.0
    assert _metric(stack, "shunter_llm_kv_blocks_total") > 0
    assert _metric(stack, "shunter_llm_kv_block_tokens") == 16
    assert _metric(stack, "shunter_llm_decode_tokens_total") > decoded_before
    assert _metric(stack, "shunter_llm_prefill_tokens_total") > 0
    assert _metric(stack, "shunter_llm_steps_total") > 0 and _metric(stack, "shunter_llm_step_seconds_total") > 0
    assert _metric(stack, "shunter_llm_attention_positions_total") > 0
    _metric(stack, "shunter_llm_preemptions_total")


def test_the_engines_step_counters_account_for_a_served_generation(stack: RunningStack) -> None:
    address = f"127.0.0.1:{stack.worker.metrics_port}"
    before = asyncio.run(engine_counters(address))
    with stack.client() as client:
        answer = client.post("/v1/chat/completions", json={
            "model": "chat", "max_tokens": 12, "temperature": 0,
            "messages": [{"role": "user", "content": "Name the planets of the solar system."}]})
    assert answer.status_code == 200, answer.text
    usage = answer.json()["usage"]
    busy = engine_busy(before, asyncio.run(engine_counters(address)))
    assert busy is not None
    computed_prompt = usage["prompt_tokens"] - busy["prefix_hit_tokens"]
    assert busy["prefill_tokens"] == computed_prompt and busy["decode_tokens"] >= usage["completion_tokens"] - 1
    assert busy["steps"] >= 1 + usage["completion_tokens"] - 1 and 0 < busy["step_s"] < 60
    assert busy["attention_positions"] >= computed_prompt * (computed_prompt - 1) / 2
