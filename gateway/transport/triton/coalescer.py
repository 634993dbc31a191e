"""Gateway-side row batching for batched models: concurrent requests share one Triton call.

While ``max_in_flight`` calls to a model are running, newly submitted requests wait here; as soon
as a call returns, everything waiting (whole requests, up to ``max_batch_rows`` rows) leaves as
one merged call, and each request gets back exactly its own rows of every output. No delay is
added: an idle model gets a request at once. This keeps Triton's queue shallow and saves the
per-call gRPC and python-backend overhead that dominates small requests on a CPU host.

Requests are merged only within one coalescer, which the caller keys by everything that must be
equal inside a call (model, allowed regions); the merged call runs at the most urgent priority of
its requests. A request whose caller gave up (cancelled) is dropped before dispatch.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np
from opentelemetry.context import Context

from gateway import tracing

Columns = dict[str, np.ndarray]
SendBatch = Callable[[Columns, int, str], Awaitable[Columns]]


@dataclass
class _Pending:
    columns: Columns
    rows: int
    priority: int
    request_id: str
    result: asyncio.Future[Columns]
    trace: Context | None  # the submitter's trace context; a merged call is traced in its first request's


class RowCoalescer:
    def __init__(self, send: SendBatch, max_batch_rows: int, max_in_flight: int) -> None:
        if max_batch_rows < 1 or max_in_flight < 1:
            raise ValueError("max_batch_rows and max_in_flight must be positive")
        self._send = send
        self._max_batch_rows = max_batch_rows
        self._max_in_flight = max_in_flight
        self._waiting: deque[_Pending] = deque()
        self._in_flight = 0
        self.calls = 0  # merged calls sent, for tests and metrics

    async def submit(self, columns: Columns, priority: int, request_id: str) -> Columns:
        """Outputs for ``columns`` (at most ``max_batch_rows`` rows); raises what the call raised."""
        rows = len(next(iter(columns.values())))
        if rows > self._max_batch_rows:
            raise ValueError(f"{rows} rows exceed the batch limit of {self._max_batch_rows}")
        future: asyncio.Future[Columns] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Pending(columns, rows, priority, request_id, future, tracing.current()))
        self._dispatch_ready()
        return await future

    def _take_batch(self) -> list[_Pending]:
        batch: list[_Pending] = []
        rows = 0
        while self._waiting:
            head = self._waiting[0]
            if head.result.done():  # cancelled by its caller while waiting
                self._waiting.popleft()
                continue
            if batch and rows + head.rows > self._max_batch_rows:
                break
            batch.append(self._waiting.popleft())
            rows += head.rows
        return batch

    def _dispatch_ready(self) -> None:
        while self._in_flight < self._max_in_flight and self._waiting:
            batch = self._take_batch()
            if not batch:
                return
            self._in_flight += 1
            self.calls += 1
            asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(self, batch: list[_Pending]) -> None:
        try:
            merged = {name: np.concatenate([p.columns[name] for p in batch]) for name in batch[0].columns}
            with tracing.attached(batch[0].trace):
                outputs = await self._send(merged, min(p.priority for p in batch), batch[0].request_id)
        except BaseException as exc:  # every waiting caller learns the outcome, then re-raise cancels
            for pending in batch:
                if pending.result.done():
                    continue
                if isinstance(exc, Exception):
                    pending.result.set_exception(exc)
                else:
                    pending.result.cancel()
            if not isinstance(exc, Exception):
                raise
        else:
            start = 0
            for pending in batch:
                end = start + pending.rows
                if not pending.result.done():
                    pending.result.set_result({name: value[start:end] for name, value in outputs.items()})
                start = end
        finally:
            self._in_flight -= 1
            self._dispatch_ready()
