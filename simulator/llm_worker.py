"""An LLM engine in virtual time: iteration-level (continuous) batching, a per-iteration token
budget with chunked prefill, and a paged KV pool sized from GPU memory minus weights, whose blocks
are allocated on demand and reclaimed by preemption (vLLM's PagedAttention with recompute, and
the ``python_backends/chat`` engine).

Contract: ``enqueue(sequence)`` hands the engine a request (the driver's dispatch). Each iteration

1. makes room for growth: when the decoding sequences' next tokens need more blocks than are
   free, the running sequence of the lowest tier admitted most recently is preempted: its blocks
   are freed and it goes back to the head of the waiting queue (to its place in tier and arrival
   order with ``priority_admission``), to prefill its prompt and the
   tokens it had generated again (recompute; its first token is not emitted twice);
2. when nothing was preempted, admits waiting sequences in order (arrival, or tier then arrival
   with ``EngineLimits.priority_admission``) while a sequence slot and blocks for the prompt are
   free beyond the next iteration's growth and a watermark (1 % of the blocks, vLLM's default);
3. gives every decoding sequence one token and fills the rest of the token budget with prompt
   chunks. The iteration that finishes a prompt emits the first token.

Iterations with no prompt work and the same batch are fast-forwarded as one segment up to the
next sequence end or the last iteration whose growth the free blocks hold; an arrival that can
join cuts the segment at the next iteration boundary, so the result equals stepping one iteration
at a time (with the KV read at the segment's mid-point). A sequence running alone is never
preempted (one larger than the pool runs alone, past it). With ``lazy_timeouts`` (Triton's queue
policy) a waiting head whose deadline passed is dropped when it reaches the head of the queue,
not at its deadline (a preempted sequence is not: it was already started).

The batching settings come from the timing model's ``EngineLimits`` (``perf.protocol``): sequence
slots, tokens per iteration, prompt tokens per iteration, KV pool, and whether a short new prompt
gets an iteration of its own while others decode (``short_prefill_first``: the sequences admitted
but not yet started are prefilled alone, within one chunk, when the first of them fits one chunk;
never two such iterations in a row).
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from scheduling.fair_queue import TIERS_IN_ORDER
from scheduling.requests import Request
from simulator.engine import STEP, Event, EventLoop
from simulator.kv_blocks import WATERMARK_SHARE, blocks_for, growth_blocks, max_decode_steps
from simulator.perf.protocol import IterationWork, LlmPerfModel


class WorkerListener(Protocol):
    """What a worker tells the driver."""

    def first_token(self, request_id: str, now: float) -> None: ...

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None: ...

    def dropped(self, request_id: str, now: float) -> None: ...


@dataclass
class Sequence:
    """One request inside the engine; ``output_tokens`` is what it will really generate (an LLM
    generates at least one token). ``recomputed``: generated tokens that the current prefill
    rebuilds after a preemption; ``blocks``: KV blocks held; ``admitted``: admission order;
    ``queued``: order of its first arrival at the engine."""

    request: Request
    output_tokens: int
    prefilled: int = 0
    generated: int = 0
    blocks: int = 0
    recomputed: int = 0
    admitted: int = 0
    preemptions: int = 0
    queued: int = 0

    @property
    def prompt(self) -> int:
        """Tokens to prefill: the prompt, plus the tokens generated before a preemption."""
        return max(1, self.request.prefill_tokens) + self.recomputed

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.prompt

    @property
    def kv_tokens(self) -> int:
        """Tokens whose KV the sequence holds."""
        return self.prefilled + self.generated - self.recomputed


@dataclass
class _Segment:
    start_s: float
    step_s: float
    steps: int
    chunks: tuple[tuple[Sequence, int], ...]
    decoders: tuple[Sequence, ...]
    event: Event


def _victim_key(sequence: Sequence) -> tuple[int, int]:
    """Preemption order: the lowest tier first, then the most recently admitted."""
    return TIERS_IN_ORDER.index(sequence.request.tier), sequence.admitted


def _priority_key(sequence: Sequence) -> tuple[int, int]:
    """Admission order with ``priority_admission``: the highest tier first, then the first queued."""
    return TIERS_IN_ORDER.index(sequence.request.tier), sequence.queued


class LlmWorker:
    def __init__(self, worker_id: str, perf: LlmPerfModel, loop: EventLoop, listener: WorkerListener,
                 lazy_timeouts: bool = False) -> None:
        self.worker_id = worker_id
        self.perf = perf
        self.limits = perf.limits
        self.loop = loop
        self.listener = listener
        self.lazy_timeouts = lazy_timeouts
        self.total_blocks = self.limits.kv_pool_tokens // self.limits.kv_block_tokens
        self.free_blocks = self.total_blocks
        self.watermark_blocks = int(self.total_blocks * WATERMARK_SHARE)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.busy_s = 0.0
        self.iterations = 0
        self.preemptions = 0
        self.recomputed_tokens = 0  # prompt plus generated tokens prefilled again after preemptions
        self._admissions = 0
        self._arrivals = 0
        self._segment: _Segment | None = None
        self._last_short = False  # the last iteration was a short-prefill-first one

    def enqueue(self, sequence: Sequence) -> None:
        """Take a dispatched request; start at once if idle, or cut a decode segment if it can join."""
        self._arrivals += 1
        sequence.queued = self._arrivals
        self._wait(sequence, head=False)
        segment = self._segment
        if segment is None:
            self._begin()
        elif segment.steps > 1 and self._can_admit(self.waiting[0]):
            self._cut(segment)

    def _wait(self, sequence: Sequence, head: bool) -> None:
        """Queue ``sequence``: at its tier-and-arrival place with ``priority_admission``, else at
        the tail (a new one) or the head (a preempted one)."""
        if self.limits.priority_admission:
            bisect.insort(self.waiting, sequence, key=_priority_key)
        elif head:
            self.waiting.appendleft(sequence)
        else:
            self.waiting.append(sequence)

    def _growing(self) -> list[tuple[int, int]]:
        """``(kv_tokens, held_blocks)`` of the decoding sequences (the ones that grow)."""
        return [(s.kv_tokens, s.blocks) for s in self.running if s.decoding]

    def _can_admit(self, sequence: Sequence) -> bool:
        """A slot is free, and blocks for the prompt (and its first token) are free beyond the next
        iteration's growth and the watermark; an idle engine takes anything."""
        if len(self.running) >= self.limits.max_sequences:
            return False
        if not self.running:
            return True
        room = self.free_blocks - growth_blocks(self._growing(), 1) - self.watermark_blocks
        return blocks_for(sequence.prompt + 1) <= room

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
            head = self.waiting[0]
            if (self.lazy_timeouts and not head.preemptions
                    and drop_expired_head(self.waiting, self.loop.now, self.listener)):
                continue
            if not self._can_admit(head):
                return
            self.waiting.popleft()
            head.blocks = blocks_for(head.prompt + 1)
            self.free_blocks -= head.blocks
            self._admissions += 1
            head.admitted = self._admissions
            self.running.append(head)

    def _preempt_for_growth(self) -> bool:
        """Preempt until the decoding sequences' next tokens fit the free blocks (never the last
        running sequence); True when any was preempted."""
        preempted = False
        while len(self.running) > 1 and growth_blocks(self._growing(), 1) > self.free_blocks:
            victim = max(self.running, key=_victim_key)
            self.running.remove(victim)
            self.free_blocks += victim.blocks
            victim.blocks, victim.prefilled, victim.recomputed = 0, 0, victim.generated
            victim.preemptions += 1
            self.preemptions += 1
            self.recomputed_tokens += victim.prompt
            self._wait(victim, head=True)  # FCFS: victims keep their admission order at the head
            preempted = True
        return preempted

    def _decode_steps(self, decoders: list[Sequence]) -> int:
        """Identical decode iterations to run as one segment: up to the next sequence end, and no
        further than the free blocks hold the growth (at least one: room was made for it)."""
        steps = min(max(1, s.output_tokens) - s.generated for s in decoders)
        if len(self.running) == 1:
            return steps
        return max(1, max_decode_steps(self._growing(), self.free_blocks, steps))

    def _begin(self) -> None:
        """Plan the next iteration (or segment of identical decode iterations)."""
        if not self._preempt_for_growth():
            self._admit()
        if not self.running:
            self._segment = None
            return
        decoders = [s for s in self.running if s.decoding]
        chunks = self._short_prefill_chunks(decoders)
        self._last_short = chunks is not None
        resting = 0
        if chunks is None:
            chunks = self._mixed_chunks(len(decoders))
        else:
            resting, decoders = len(decoders), []  # a short-prefill iteration holds no decodes
        kv = sum(s.kv_tokens for s in self.running)
        context = sum(s.kv_tokens - 1 for s in decoders)
        now = self.loop.now
        if chunks:
            steps = 1
            work = IterationWork(tuple((s.prefilled, c) for s, c in chunks), len(decoders), context, kv, resting,
                                 start_s=now)
        else:
            steps = self._decode_steps(decoders)
            growth = len(decoders) * (steps - 1) // 2  # the KV read at the segment's mid-point
            work = IterationWork((), len(decoders), context + growth, kv + growth, start_s=now)
        step_s = self.perf.iteration_s(work)
        event = self.loop.at(now + steps * step_s, STEP, self._end)
        self._segment = _Segment(now, step_s, steps, tuple(chunks), tuple(decoders), event)

    def _mixed_chunks(self, decoding: int) -> list[tuple[Sequence, int]]:
        """Prompt chunks of the running sequences, in admission order, within what the decodes left."""
        budget = min(self.limits.prefill_chunk_tokens, self.limits.step_token_budget - decoding)
        chunks: list[tuple[Sequence, int]] = []
        for sequence in self.running:
            if budget <= 0:
                break
            if not sequence.decoding:
                chunk = min(sequence.prompt - sequence.prefilled, budget)
                chunks.append((sequence, chunk))
                budget -= chunk
        return chunks

    def _short_prefill_chunks(self, decoders: list[Sequence]) -> list[tuple[Sequence, int]] | None:
        """The chunks of a short-prefill-first iteration, or None when a mixed one applies."""
        limits = self.limits
        if not limits.short_prefill_first or self._last_short or not decoders:
            return None
        fresh = [s for s in self.running if s.prefilled == 0]
        if not fresh or fresh[0].prompt > limits.prefill_chunk_tokens:
            return None
        room = min(limits.prefill_chunk_tokens, limits.step_token_budget)
        chunks: list[tuple[Sequence, int]] = []
        for sequence in fresh:
            if room <= 0:
                break
            chunks.append((sequence, min(sequence.prompt, room)))
            room -= chunks[-1][1]
        return chunks

    def _end(self) -> None:
        segment = self._segment
        assert segment is not None
        now = self.loop.now
        self.busy_s += segment.steps * segment.step_s
        self.iterations += segment.steps
        for sequence in segment.decoders:
            sequence.generated += segment.steps
        for sequence, chunk in segment.chunks:
            sequence.prefilled += chunk
            if sequence.decoding:
                self._prefilled(sequence, now)
        still: list[Sequence] = []
        for sequence in self.running:
            self._grow(sequence)
            if sequence.decoding and sequence.generated >= max(1, sequence.output_tokens):
                self.free_blocks += sequence.blocks
                sequence.blocks = 0
                self.listener.finished(sequence.request.request_id, now, sequence.generated)
            else:
                still.append(sequence)
        self.running = still
        self._begin()

    def _prefilled(self, sequence: Sequence, now: float) -> None:
        """The iteration that finished a prefill samples a token: the first one (emitted), or after
        a recompute the next one."""
        if sequence.generated == 0:
            sequence.generated = 1
            self.listener.first_token(sequence.request.request_id, now)
        else:
            sequence.generated += 1

    def _grow(self, sequence: Sequence) -> None:
        """Allocate the blocks the sequence's KV grew into (planned to fit when the iteration began)."""
        more = blocks_for(sequence.kv_tokens) - sequence.blocks
        if more > 0:
            sequence.blocks += more
            self.free_blocks -= more

    @property
    def kv_used_tokens(self) -> int:
        return (self.total_blocks - self.free_blocks) * self.limits.kv_block_tokens


def drop_expired_head(waiting: deque[Sequence], now: float, listener: WorkerListener) -> bool:
    """Triton's lazy timeout: drop the head of the queue if its deadline passed (only the head is
    looked at, as Triton does); True when one was dropped."""
    if waiting[0].request.deadline_s >= now:
        return False
    listener.dropped(waiting.popleft().request.request_id, now)
    return True
