"""A batched non-LLM model in virtual time (Triton's dynamic batcher in front of one model
instance): when idle it takes the queued requests in arrival order up to ``max_batch_rows`` rows
(at least one request) and runs them as one batch of ``BatchedPerf.batch_s(rows)``; every request
of the batch gets its result (first and only output) when the batch ends. ``lazy_timeouts`` as in
the LLM worker. Same listener protocol as ``LlmWorker``."""

from __future__ import annotations

from collections import deque

from simulator.engine import STEP, EventLoop
from simulator.llm_worker import Sequence, WorkerListener, drop_expired_head
from simulator.perf.gpu import BatchedPerf


class BatchedWorker:
    def __init__(self, worker_id: str, perf: BatchedPerf, loop: EventLoop, listener: WorkerListener,
                 max_batch_rows: int, lazy_timeouts: bool = False) -> None:
        if max_batch_rows < 1:
            raise ValueError("max_batch_rows must be >= 1")
        self.worker_id = worker_id
        self.perf = perf
        self.loop = loop
        self.listener = listener
        self.max_batch_rows = max_batch_rows
        self.lazy_timeouts = lazy_timeouts
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.busy_s = 0.0
        self.iterations = 0
        self.batch_rows: list[int] = []

    def enqueue(self, sequence: Sequence) -> None:
        self.waiting.append(sequence)
        if not self.running:
            self._begin()

    def _begin(self) -> None:
        rows = 0
        while self.waiting:
            if self.lazy_timeouts and drop_expired_head(self.waiting, self.loop.now, self.listener):
                continue
            head = self.waiting[0]
            if self.running and rows + head.request.rows > self.max_batch_rows:
                break
            self.running.append(self.waiting.popleft())
            rows += head.request.rows
        if self.running:
            duration = self.perf.batch_s(rows)
            self.busy_s += duration
            self.iterations += 1
            self.batch_rows.append(rows)
            self.loop.at(self.loop.now + duration, STEP, self._end)

    def _end(self) -> None:
        done, self.running = self.running, []
        now = self.loop.now
        for sequence in done:
            self.listener.first_token(sequence.request.request_id, now)
            self.listener.finished(sequence.request.request_id, now, 0)
        if not self.running:
            self._begin()
