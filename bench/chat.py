"""Streaming generation (the ``chat`` model): through the gateway (SSE) and direct (gRPC stream).

``GatewayChat.stream()`` and ``DirectChat.stream()`` each run one generation of the fixed prompt
(greedy, ``CHAT_MAX_TOKENS``) and return its ``StreamTiming``, or raise (also when nothing
arrives for ``idle_timeout_s``). Times are taken when a
chunk with text arrives at the client. ``run_streams(stream, streams, duration_s)`` runs
``streams`` concurrent clients, each starting generations back to back until ``duration_s`` has
passed (at least one each); it returns every timing and the error count, bounded by
``duration_s + request_timeout_s``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import httpx
import numpy as np
import orjson
import tritonclient.grpc.aio as grpcclient

from bench.clients import TRITON_PRIORITY, BadResponse, RefusedResponse
from bench.workload import CHAT_MAX_TOKENS, CHAT_PROMPT, CHAT_SYSTEM, CHAT_USER

IDLE_TIMEOUT_S = 20.0
T = TypeVar("T")


async def with_idle_timeout(items: AsyncIterable[T], idle_timeout_s: float) -> AsyncIterator[T]:
    """Yield from ``items``; raise ``BadResponse`` when the next item takes over ``idle_timeout_s``."""
    iterator = aiter(items)
    while True:
        try:
            item = await asyncio.wait_for(anext(iterator), idle_timeout_s)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise BadResponse(f"nothing received for {idle_timeout_s:.0f} s") from None
        yield item


@dataclass(frozen=True)
class StreamTiming:
    """One generation: time to first token, mean inter-token gap, decode rate per stream."""

    ttft_ms: float
    itl_ms: float  # NaN with fewer than two text chunks
    tokens_per_s: float  # completion tokens / (last chunk - first chunk); NaN as above
    completion_tokens: int
    chunks: int


def timing(started: float, chunk_times: list[float], completion_tokens: int) -> StreamTiming:
    """Build a ``StreamTiming`` from the arrival times of the chunks that carried text."""
    if not chunk_times:
        raise BadResponse("the stream carried no text")
    span = chunk_times[-1] - chunk_times[0]
    gaps = len(chunk_times) - 1
    return StreamTiming(
        ttft_ms=(chunk_times[0] - started) * 1000.0,
        itl_ms=span * 1000.0 / gaps if gaps else math.nan,
        tokens_per_s=completion_tokens / span if span > 0 else math.nan,
        completion_tokens=completion_tokens, chunks=len(chunk_times),
    )


def refused(status: int, body: bytes, retry_after: str | None = None) -> RefusedResponse:
    """The error for an HTTP error answer, with the documented error body's ``code`` when it has one
    and the ``Retry-After`` header (``retry_after``) when it is a number of seconds."""
    try:
        error = orjson.loads(body).get("error")
    except orjson.JSONDecodeError:
        error = None
    retry_after_s = float(retry_after) if retry_after is not None and retry_after.strip().isdigit() else None
    return RefusedResponse(status, error.get("code") if isinstance(error, dict) else None, body, retry_after_s)


class GatewayChat:
    """``POST /v1/chat/completions`` with ``stream: true``, read as SSE."""

    def __init__(self, http: httpx.AsyncClient, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 user: str = CHAT_USER, max_tokens: int = CHAT_MAX_TOKENS, system: str = CHAT_SYSTEM) -> None:
        self.http = http
        self.idle_timeout_s = idle_timeout_s
        self.body = orjson.dumps({
            "model": "chat", "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        })

    async def stream(self, arrivals: list[float] | None = None) -> StreamTiming:
        """One generation; with ``arrivals``, each text chunk's arrival time is also appended there
        as it arrives (so a generation cut off mid-way still counts what it streamed)."""
        started = time.perf_counter()
        times: list[float] = []
        tokens, done = 0, False
        async with self.http.stream("POST", "/v1/chat/completions", content=self.body,
                                    headers={"Content-Type": "application/json"}) as response:
            if response.status_code != 200:
                raise refused(response.status_code, await response.aread(), response.headers.get("retry-after"))
            last_data = time.perf_counter()
            async for line in with_idle_timeout(response.aiter_lines(), self.idle_timeout_s):
                if not line.startswith("data:"):  # an SSE ping or comment: not progress
                    if time.perf_counter() - last_data > self.idle_timeout_s:
                        raise BadResponse(f"no data for {self.idle_timeout_s:.0f} s")
                    continue
                last_data = time.perf_counter()
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                event = orjson.loads(data)
                if "error" in event:
                    raise BadResponse(f"error event: {str(event['error'])[:200]}")
                choices = event.get("choices") or [{}]
                if choices[0].get("delta", {}).get("content"):
                    times.append(time.perf_counter())
                    if arrivals is not None:
                        arrivals.append(times[-1])
                if event.get("usage"):
                    tokens = int(event["usage"]["completion_tokens"])
        if not done:
            raise BadResponse("the stream ended without [DONE]")
        return timing(started, times, tokens or len(times))


class DirectChat:
    """One ``stream_infer`` call per generation on a Triton worker's gRPC port."""

    def __init__(self, grpc_url: str, idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.grpc = grpcclient.InferenceServerClient(grpc_url)
        self.idle_timeout_s = idle_timeout_s
        self.inputs = [
            _tensor("prompt", np.array([CHAT_PROMPT.encode()], dtype=np.object_), "BYTES"),
            _tensor("max_tokens", np.array([CHAT_MAX_TOKENS], dtype=np.int32), "INT32"),
            _tensor("temperature", np.array([0.0], dtype=np.float32), "FP32"),
        ]

    async def stream(self) -> StreamTiming:
        complete = asyncio.Event()

        async def requests() -> AsyncIterator[dict[str, Any]]:
            yield {"model_name": "chat", "inputs": self.inputs, "priority": TRITON_PRIORITY}
            await complete.wait()

        started = time.perf_counter()
        times: list[float] = []
        call = self.grpc.stream_infer(requests())
        try:
            async for result, error in with_idle_timeout(call, self.idle_timeout_s):
                if error is not None:
                    raise BadResponse(f"triton: {error}")
                if result.as_numpy("text_output").reshape(-1)[0]:
                    times.append(time.perf_counter())
                if result.as_numpy("finish_reason").reshape(-1)[0]:
                    tokens = int(result.as_numpy("completion_tokens").reshape(-1)[0])
                    return timing(started, times, tokens)
            raise BadResponse("the stream ended without a finish_reason")
        finally:
            complete.set()
            call.cancel()

    async def aclose(self) -> None:
        await self.grpc.close()


def _tensor(name: str, value: np.ndarray, datatype: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(value.shape), datatype)
    tensor.set_data_from_numpy(value)
    return tensor


@dataclass
class ChatRun:
    """Every generation of one run (path, streams, repeat)."""

    timings: list[StreamTiming] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"timings": [asdict(t) for t in self.timings], "errors": self.errors,
                "error_samples": self.error_samples, "wall_s": self.wall_s}


async def run_streams(stream: Callable[[], Awaitable[StreamTiming]], streams: int, duration_s: float,
                      request_timeout_s: float = 120.0) -> ChatRun:
    """See the module docstring."""
    run = ChatRun()
    started = time.perf_counter()
    deadline = started + duration_s

    async def client() -> None:
        first = True
        while first or time.perf_counter() < deadline:
            first = False
            try:
                run.timings.append(await asyncio.wait_for(stream(), request_timeout_s))
            except Exception as exc:  # counted; the run goes on
                run.errors += 1
                if len(run.error_samples) < 5:
                    run.error_samples.append(f"{type(exc).__name__}: {exc}"[:300])

    tasks = [asyncio.create_task(client()) for _ in range(streams)]
    _, pending = await asyncio.wait(tasks, timeout=duration_s + 2 * request_timeout_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    run.wall_s = time.perf_counter() - started
    return run
