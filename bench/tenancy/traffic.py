"""Client side of the scenarios: one request -> one ``Observation``; open-loop arrivals.

Chat requests stream, so the observation has the time to the first content token (TTFT) as the
client saw it; the gateway's ``x-queue-wait-ms`` header splits that into the wait in the gateway's
queue and the time in the engine. Embedding requests record their whole latency as ``ttft_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import httpx

REQUEST_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Observation:
    tenant: str
    kind: str
    status: int
    sent_s: float
    total_s: float
    ttft_s: float | None = None
    queue_wait_s: float | None = None
    pool: str | None = None
    code: str | None = None
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.code is None

    @property
    def engine_s(self) -> float | None:
        """TTFT minus the queue wait: the time spent past the gateway's queue."""
        if self.ttft_s is None or self.queue_wait_s is None:
            return None
        return max(0.0, self.ttft_s - self.queue_wait_s)


def _error_code(payload: bytes | str) -> str | None:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        return str(json.loads(payload)["error"]["code"])
    return "unreadable_error"


def _wait_s(response: httpx.Response) -> float | None:
    value = response.headers.get("x-queue-wait-ms")
    return float(value) / 1000 if value is not None else None


async def chat(client: httpx.AsyncClient, tenant: str, key: str, prompt: str, max_tokens: int,
               deadline_ms: int | None = None) -> Observation:
    body = {"model": "chat", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True}
    headers = {"Authorization": f"Bearer {key}"}
    if deadline_ms is not None:
        headers["X-Deadline-Ms"] = str(deadline_ms)
    started = time.perf_counter()
    ttft_s: float | None = None
    code: str | None = None
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            code = _error_code(await response.aread())
        else:
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    code = str(chunk["error"]["code"])
                elif ttft_s is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    ttft_s = time.perf_counter() - started
    return Observation(tenant, "chat", response.status_code, started, time.perf_counter() - started, ttft_s,
                       _wait_s(response), response.headers.get("x-shunter-pool"), code,
                       response.headers.get("retry-after"))


async def embed(client: httpx.AsyncClient, tenant: str, key: str, texts: list[str]) -> Observation:
    started = time.perf_counter()
    response = await client.post("/v1/embeddings", json={"model": "embed", "input": texts},
                                 headers={"Authorization": f"Bearer {key}"})
    total = time.perf_counter() - started
    code = None if response.status_code == 200 else _error_code(response.content)
    return Observation(tenant, "embed", response.status_code, started, total, total if code is None else None,
                       _wait_s(response), response.headers.get("x-shunter-pool"), code,
                       response.headers.get("retry-after"))


async def open_loop(rate_per_s: float, duration_s: float,
                    make: Callable[[int], Coroutine[Any, Any, Observation]]) -> list[asyncio.Task[Observation]]:
    """Start ``make(i)`` at ``i / rate_per_s`` for ``duration_s``; return the tasks (not awaited)."""
    tasks: list[asyncio.Task[Observation]] = []
    start = time.perf_counter()
    for i in range(int(rate_per_s * duration_s)):
        delay = start + i / rate_per_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(make(i)))
    return tasks


async def settle(tasks: list[asyncio.Task[Observation]], timeout_s: float = REQUEST_TIMEOUT_S,
                 cancel_rest: bool = False) -> list[Observation]:
    """The observations of ``tasks`` that finish within ``timeout_s`` (or at once, with
    ``cancel_rest``: the rest are cancelled, i.e. their clients disconnect)."""
    if tasks and not cancel_rest:
        await asyncio.wait(tasks, timeout=timeout_s)
    for task in tasks:
        if not task.done():
            task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return [r for r in results if isinstance(r, Observation)]
