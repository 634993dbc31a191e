"""Reusable gRPC streams to one Triton worker, one generation at a time on each.

Triton's gRPC frontend keeps memory for every bidirectional stream it has served: with a new
``ModelStreamInfer`` stream per generation, tritonserver grew by about 14 KiB per generation
(17.7 MiB per 10 minutes under 8 streamed chat clients), and by 0.4 MiB per 10 minutes when each
client reused one stream (``docs/benchmarks.md``, "Memory over time: soaks, and tritonserver's
memory and gRPC streams"). So the gateway opens a stream per *concurrent* generation and reuses it
for the next one.

Contract:
- ``acquire()`` gives an idle stream (the most recently used) or opens one; the caller sends one
  request on it and reads that request's responses until the one that ends it.
- ``release(stream)`` returns a stream whose request ended normally (its last response was read),
  so nothing of that request can arrive on it any more; at most ``max_idle`` streams stay idle,
  and one idle for longer than ``max_idle_s`` is closed instead of reused.
- ``discard(stream)`` closes a stream whose request did not end normally. Cancelling the gRPC
  call is how a generation is cancelled (Triton forwards it to the model as
  ``request.is_cancelled()``), and it ends the stream, so such a stream is never reused.
- ``close()`` closes the idle streams (worker shutdown, or the worker became unreachable: a
  stream of a dead connection would fail its next request).

Written by hand: ``tritonclient.grpc.aio.stream_infer`` gives the stream; no library pools them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import InferResult
from tritonclient.utils import InferenceServerException

MAX_IDLE_STREAMS = 64
MAX_IDLE_S = 60.0


class GenerationStream:
    """One open ``ModelStreamInfer`` call: requests go out through a queue, responses are read
    one at a time (``next``); ``reused`` is true once it has carried an earlier request."""

    def __init__(self, client: grpcclient.InferenceServerClient) -> None:
        self._outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._call = client.stream_infer(self._requests())
        self._responses = self._call.__aiter__()
        self.reused = False
        self.idle_since_s = 0.0

    async def _requests(self) -> AsyncIterator[dict[str, Any]]:
        while (payload := await self._outbox.get()) is not None:
            yield payload

    def send(self, payload: dict[str, Any]) -> None:
        self._outbox.put_nowait(payload)

    async def next(self) -> tuple[InferResult | None, InferenceServerException | None]:
        """The next response of the request in flight (a result, or the model's error); raises
        ``StopAsyncIteration`` when the stream ended, ``InferenceServerException`` (with the gRPC
        status) when the call failed."""
        try:
            result: tuple[InferResult | None, InferenceServerException | None] = await self._responses.__anext__()
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None
            raise InferenceServerException(msg=f"stream failed: {exc}", status=str(code)) from exc
        return result

    def close(self) -> None:
        self._outbox.put_nowait(None)
        self._call.cancel()


class GenerationStreams:
    """The streams of one worker; see the module docstring."""

    def __init__(self, client: grpcclient.InferenceServerClient, max_idle: int = MAX_IDLE_STREAMS,
                 max_idle_s: float = MAX_IDLE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._idle: list[GenerationStream] = []
        self._max_idle = max_idle
        self._max_idle_s = max_idle_s
        self._clock = clock
        self.opened = 0

    @property
    def idle(self) -> int:
        return len(self._idle)

    def acquire(self, fresh: bool = False) -> GenerationStream:
        """An idle stream, or a new one (always new with ``fresh``)."""
        now = self._clock()
        while self._idle and not fresh:
            stream = self._idle.pop()
            if now - stream.idle_since_s <= self._max_idle_s:
                stream.reused = True
                return stream
            stream.close()
        self.opened += 1
        return GenerationStream(self._client)

    def release(self, stream: GenerationStream) -> None:
        now = self._clock()
        while self._idle and now - self._idle[0].idle_since_s > self._max_idle_s:
            self._idle.pop(0).close()
        if len(self._idle) >= self._max_idle:
            stream.close()
            return
        stream.idle_since_s = now
        self._idle.append(stream)

    @staticmethod
    def discard(stream: GenerationStream) -> None:
        stream.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
