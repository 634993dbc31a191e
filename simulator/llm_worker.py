"""An LLM engine in virtual time: iteration-level (continuous) batching, a per-iteration token
budget with chunked prefill, and a paged KV pool sized from GPU memory minus weights.

Contract: ``enqueue(sequence)`` hands the engine a request (the driver's dispatch). Each iteration
admits waiting sequences in arrival order while a sequence slot and KV blocks for the prompt plus
the reserved output are free (no eviction), gives every decoding sequence one token and fills the
rest of the token budget with prompt chunks. The iteration that finishes a prompt emits the first
token. Iterations with no prompt work and the same batch are fast-forwarded as one segment up to
the next sequence end; an arrival that can join cuts the segment at the next iteration boundary, so
the result equals stepping one iteration at a time (with the KV read at the segment's mid-point).
With ``lazy_timeouts`` (Triton's queue policy) a waiting head whose deadline passed is dropped
when it reaches the head of the queue, not at its deadline.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from scheduling.requests import Request
from simulator.engine import STEP, Event, EventLoop
from simulator.hardware import KV_BLOCK_TOKENS
from simulator.perf import MAX_SEQUENCES, LlmPerf


class WorkerListener(Protocol):
    """What a worker tells the driver."""

    def first_token(self, request_id: str, now: float) -> None: ...

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None: ...

    def dropped(self, request_id: str, now: float) -> None: ...


@dataclass
class Sequence:
    """One request inside the engine; ``output_tokens`` is what it will really generate (an LLM
    generates at least one token)."""

    request: Request
    output_tokens: int
    prefilled: int = 0
    generated: int = 0
    blocks: int = 0

    @property
    def prompt(self) -> int:
        return max(1, self.request.prefill_tokens)

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.prompt


@dataclass
class _Segment:
    start_s: float
    step_s: float
    steps: int
    chunks: tuple[tuple[Sequence, int], ...]
    event: Event


class LlmWorker:
    def __init__(self, worker_id: str, perf: LlmPerf, loop: EventLoop, listener: WorkerListener,
                 lazy_timeouts: bool = False) -> None:
        self.worker_id = worker_id
        self.perf = perf
        self.loop = loop
        self.listener = listener
        self.lazy_timeouts = lazy_timeouts
        self.total_blocks = perf.kv_pool_tokens // KV_BLOCK_TOKENS
        self.free_blocks = self.total_blocks
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.busy_s = 0.0
        self.iterations = 0
        self._segment: _Segment | None = None

    def blocks_for(self, sequence: Sequence) -> int:
        return math.ceil((sequence.prompt + sequence.request.max_output_tokens) / KV_BLOCK_TOKENS)

    def enqueue(self, sequence: Sequence) -> None:
        """Take a dispatched request; start at once if idle, or cut a decode segment if it can join."""
        self.waiting.append(sequence)
        segment = self._segment
        if segment is None:
            self._begin()
        elif segment.steps > 1 and self._can_admit(self.waiting[0]):
            self._cut(segment)

    def _can_admit(self, sequence: Sequence) -> bool:
        if len(self.running) >= MAX_SEQUENCES:
            return False
        need = self.blocks_for(sequence)
        return need <= self.free_blocks or (not self.running and need > self.total_blocks)

    def _cut(self, segment: _Segment) -> None:
        done = int((self.loop.now - segment.start_s) / segment.step_s) + 1
        if done >= segment.steps:
            return
        segment.event.cancel()
        segment.steps = done
        end = segment.start_s + done * segment.step_s
        segment.event = self.loop.at(end, STEP, self._end)

    def _admit(self) -> None:
        while self.waiting:
            if self.lazy_timeouts and drop_expired_head(self.waiting, self.loop.now, self.listener):
                continue
            head = self.waiting[0]
            if not self._can_admit(head):
                return
            self.waiting.popleft()
            head.blocks = min(self.blocks_for(head), self.free_blocks)
            self.free_blocks -= head.blocks
            self.running.append(head)

    def _begin(self) -> None:
        """Plan the next iteration (or segment of identical decode iterations)."""
        self._admit()
        if not self.running:
            self._segment = None
            return
        decoders = [s for s in self.running if s.decoding]
        budget = self.perf.step_token_budget - len(decoders)
        chunks: list[tuple[Sequence, int]] = []
        for sequence in self.running:
            if budget <= 0:
                break
            if not sequence.decoding:
                chunk = min(sequence.prompt - sequence.prefilled, budget)
                chunks.append((sequence, chunk))
                budget -= chunk
        kv = sum(s.prefilled + s.generated for s in self.running)
        if chunks:
            prompt_tokens = sum(c for _, c in chunks)
            context = max(s.prefilled + c for s, c in chunks)
            steps, step_s = 1, self.perf.step_s(prompt_tokens, len(decoders), kv, context)
        else:
            steps = min(max(1, s.output_tokens) - s.generated for s in decoders)
            step_s = self.perf.step_s(0, len(decoders), kv + len(decoders) * (steps - 1) // 2)
        now = self.loop.now
        event = self.loop.at(now + steps * step_s, STEP, self._end)
        self._segment = _Segment(now, step_s, steps, tuple(chunks), event)

    def _end(self) -> None:
        segment = self._segment
        assert segment is not None
        now = self.loop.now
        self.busy_s += segment.steps * segment.step_s
        self.iterations += segment.steps
        chunked = {id(s) for s, _ in segment.chunks}
        for sequence in self.running:
            if id(sequence) not in chunked and sequence.decoding:
                sequence.generated += segment.steps
        for sequence, chunk in segment.chunks:
            sequence.prefilled += chunk
            if sequence.decoding:
                sequence.generated = 1
                self.listener.first_token(sequence.request.request_id, now)
        still: list[Sequence] = []
        for sequence in self.running:
            if sequence.decoding and sequence.generated >= max(1, sequence.output_tokens):
                self.free_blocks += sequence.blocks
                self.listener.finished(sequence.request.request_id, now, sequence.generated)
            else:
                still.append(sequence)
        self.running = still
        self._begin()

    @property
    def kv_used_tokens(self) -> int:
        return (self.total_blocks - self.free_blocks) * KV_BLOCK_TOKENS


def drop_expired_head(waiting: deque[Sequence], now: float, listener: WorkerListener) -> bool:
    """Triton's lazy timeout: drop the head of the queue if its deadline passed (only the head is
    looked at, as Triton does); True when one was dropped."""
    if waiting[0].request.deadline_s >= now:
        return False
    listener.dropped(waiting.popleft().request.request_id, now)
    return True
