"""Iteration-level scheduler: which tokens of which sequences the next model step feeds.

``StepScheduler.schedule()`` returns a ``StepPlan``; it never runs the model (the engine does, then
reports back by setting ``Sequence.computed`` and calling ``finish``). Each plan, in order:

1. one decode token for every running sequence that has sampled a token (admission order);
2. the next prompt chunk of running sequences still prefilling, within the step's prefill token
   budget (chunked prefill: a long prompt never stalls running decodes for its whole length);
3. admission of waiting sequences (priority, then arrival) while a llama.cpp sequence slot is
   free, the pool has blocks for the whole prompt, and prefill budget is left; none is admitted
   in a step that had to preempt.

Short prefills first (``short_prefill_first``): when sequences are decoding and the next waiting
sequence's remaining prompt fits one step's prefill budget, that step holds only admissions'
prefill (no decodes), so a new short request's first token costs its own prefill, not a step
mixed with every running decode (as TGI prefills new requests in a batch of their own). Never
two such steps in a row: running decodes wait at most one short step. Longer prompts go through
the mixed, chunked path above.

Prefix reuse (``prefix_cache``): a finished sequence's slot keeps its KV cells, and the tokens
they hold are remembered. A waiting sequence is admitted into the free slot whose remembered
tokens share the longest prefix with its own (at most all but its last token, whose logits are
needed), the slot's cells past that prefix are dropped (``StepPlan.trims``) and only the rest is
prefilled; a chat workload whose requests share a system prompt skips most of its prefill, as
with vLLM's automatic prefix caching. When a *running* sequence holds a longer prefix (by at least
a block) than any free slot, the new sequence takes an empty (else the lowest free) slot and the
running one's cells are copied into it (``StepPlan.copies``, ``LlamaRuntime.copy_prefix``): a burst
of requests sharing a system prompt computes it once, not once per slot (measured: an 822-token
prompt in 0.32 s with 782 tokens copied, against 4.6 s prefilled; identical logits). Only what the
source has computed is copied. A cold burst still computes its shared prompt about once: the
first prompt's chunks take each step's whole prefill budget until its last one, so the others are
admitted only then and copy all but less than a chunk of it
(``test_a_cold_burst_sharing_a_system_prompt_computes_it_about_once``). The block pool still charges the whole
sequence (the cells of idle slots are inside llama.cpp's per-slot reservation, not the pool). The
reused cells are the very values a fresh prefill computes: a token's KV depends only on the
tokens before it, and every step stays below the kernel switch of ``settings.engine`` (batch-invariant).

Compact slots: a slot is a llama.cpp KV stream, and llama.cpp computes a step's attention over
every stream from the lowest to the highest slot in the batch (``llama_kv_cache::get_k``: a view
of streams ``s0 .. s1``), so 4 sequences in slots 0 and 15 cost the attention of 16. New sequences
therefore take the lowest suitable free slot. Before, ties went to the most recently freed slot:
after a burst of 16 streams the next 4 or 8 scattered over all 16 slots, and served throughput
at 4 and 8 streams fell by a fifth until the engine restarted (``bench.continuous``, 29 November).

KV growth allocates blocks as a sequence's tokens cross block boundaries. When the pool is out
of blocks, the lowest-priority, most recently admitted running sequence is preempted: its blocks
and slot are freed (``StepPlan.released_slots``: the engine clears their cells before the step)
and it returns to the waiting queue to be recomputed. A sequence never outgrows the pool (the
engine caps its length at ``pool.capacity_tokens``), so growth always succeeds eventually.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from python_backends.chat.block_pool import BlockPool
from python_backends.chat.sequence import Sequence


@dataclass(frozen=True)
class Chunk:
    """Feed ``tokens[start:start + count]`` of ``seq`` in this step."""

    seq: Sequence
    start: int
    count: int
    decode: bool

    @property
    def wants_logits(self) -> bool:
        return self.start + self.count == len(self.seq.tokens)


@dataclass(frozen=True)
class StepPlan:
    chunks: tuple[Chunk, ...]
    released_slots: tuple[int, ...]  # slots of preempted sequences: clear their KV first
    preempted: tuple[Sequence, ...]
    trims: tuple[tuple[int, int], ...] = ()  # (slot, keep): drop the slot's cells from position keep on
    copies: tuple[tuple[int, int, int], ...] = ()  # (source, target, keep): after the trims, copy cells 0..keep-1

    @property
    def tokens(self) -> int:
        return sum(c.count for c in self.chunks)


@dataclass(frozen=True)
class SchedulerLimits:
    max_running: int  # llama.cpp sequence slots
    max_batch_tokens: int  # tokens per model step, decode + prefill
    prefill_chunk_tokens: int  # prefill tokens per model step

    def __post_init__(self) -> None:
        if not 0 < self.max_running < self.max_batch_tokens:
            raise ValueError("max_running must be at least 1 and below max_batch_tokens")
        if self.prefill_chunk_tokens < 1:
            raise ValueError("prefill_chunk_tokens must be at least 1")


def common_prefix(cached: list[int], tokens: list[int], limit: int) -> int:
    """Length of the common prefix of ``cached`` and ``tokens``, at most ``limit``."""
    n = 0
    for a, b in zip(cached, tokens[:limit], strict=False):
        if a != b:
            break
        n += 1
    return n


class StepScheduler:
    def __init__(self, pool: BlockPool, limits: SchedulerLimits, prefix_cache: bool = False,
                 short_prefill_first: bool = False) -> None:
        self.pool = pool
        self.limits = limits
        self.prefix_cache = prefix_cache
        self.short_prefill_first = short_prefill_first
        self._last_step_prefill_only = False
        self.running: list[Sequence] = []  # admission order
        self.waiting: list[Sequence] = []  # sorted by Sequence.waiting_key
        self._free_slots = set(range(limits.max_running))
        self._cached: dict[int, list[int]] = {}  # free slot -> tokens its cells still hold
        self._admissions = 0
        self.preemptions_total = 0
        self.prefix_hit_tokens_total = 0

    def add(self, seq: Sequence) -> None:
        """Queue a new (or preempted) sequence for admission."""
        keys = [s.waiting_key() for s in self.waiting]
        self.waiting.insert(bisect.bisect(keys, seq.waiting_key()), seq)

    def finish(self, seq: Sequence) -> int | None:
        """Drop ``seq`` wherever it is, free its blocks; return its slot if its KV must be cleared
        (None when there is none, or when prefix reuse keeps the cells for a later sequence)."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.pool.free(seq.number)
        slot, seq.slot = seq.slot, None
        if slot is None:
            return None
        self._free_slots.add(slot)
        if self.prefix_cache:
            self._cached[slot] = seq.tokens[:seq.computed]
            return None
        return slot

    def forget_cached(self) -> list[int]:
        """Forget every remembered prefix (after an engine failure); return the slots to clear."""
        slots = sorted(self._cached)
        self._cached.clear()
        return slots

    def schedule(self) -> StepPlan:
        """The next step's plan; see the module docstring."""
        if self.short_prefill_first and not self._last_step_prefill_only:
            plan = self._short_prefill_step()
            if plan is not None:
                self._last_step_prefill_only = True
                return plan
        self._last_step_prefill_only = False
        chunks: list[Chunk] = []
        preempted: list[Sequence] = []
        for seq in [s for s in self.running if s.decoding]:
            if seq in self.running and self._reserve(seq, seq.computed + 1, chunks, preempted):
                chunks.append(Chunk(seq, seq.computed, 1, decode=True))
        room = min(self.limits.prefill_chunk_tokens, self.limits.max_batch_tokens - len(chunks))
        for seq in [s for s in self.running if not s.decoding]:
            count = min(seq.pending, room)
            if count > 0 and seq in self.running and self._reserve(seq, seq.computed + count, chunks, preempted):
                chunks.append(Chunk(seq, seq.computed, count, decode=False))
                room -= count
        trims: list[tuple[int, int]] = []
        copies: list[tuple[int, int, int]] = []
        if not preempted:
            chunks.extend(self._admit(room, trims, copies))
        released = tuple(s.slot for s in preempted if s.slot is not None)
        for seq in preempted:
            seq.slot = None
        return StepPlan(tuple(chunks), released, tuple(preempted), tuple(trims), tuple(copies))

    def _short_prefill_step(self) -> StepPlan | None:
        """Admission prefill alone, when the head waiter's remaining prompt fits one step while
        others decode; None when the mixed step applies."""
        if not self.waiting or not self._free_slots or not any(s.decoding for s in self.running):
            return None
        head = self.waiting[0]
        choice = self._choose_slot(head)
        if len(head.tokens) - choice[1] > self.limits.prefill_chunk_tokens:
            return None
        trims: list[tuple[int, int]] = []
        copies: list[tuple[int, int, int]] = []
        room = min(self.limits.prefill_chunk_tokens, self.limits.max_batch_tokens)
        chunks = self._admit(room, trims, copies, head_choice=choice)
        return StepPlan(tuple(chunks), (), (), tuple(trims), tuple(copies)) if chunks else None

    def preempt_one(self) -> int | None:
        """Preempt the usual victim outside of planning (the engine's fallback when llama.cpp
        itself finds no KV room); return the victim's slot, whose cells the caller clears."""
        if not self.running:
            return None
        victim = self._victim()
        self._preempt(victim)
        slot, victim.slot = victim.slot, None
        return slot

    def _reserve(self, seq: Sequence, tokens: int, chunks: list[Chunk], preempted: list[Sequence]) -> bool:
        """Grow ``seq`` to ``tokens``, preempting victims as needed; False if ``seq`` itself was."""
        while not self.pool.grow(seq.number, tokens):
            victim = self._victim()
            self._preempt(victim)
            preempted.append(victim)
            chunks[:] = [c for c in chunks if c.seq is not victim]
            if victim is seq:
                return False
        return True

    def _victim(self) -> Sequence:
        return min(self.running, key=lambda s: (s.priority, -s.admitted))

    def _preempt(self, victim: Sequence) -> None:
        self.running.remove(victim)
        self.pool.free(victim.number)
        if victim.slot is not None:
            self._free_slots.add(victim.slot)
            self._cached.pop(victim.slot, None)  # its cells are cleared
        victim.computed = 0
        victim.preemptions += 1
        self.preemptions_total += 1
        self.add(victim)

    def _admit(self, room: int, trims: list[tuple[int, int]], copies: list[tuple[int, int, int]],
               head_choice: tuple[int, int, int | None] | None = None) -> list[Chunk]:
        """Admit waiters while slots, blocks and ``room`` last; ``head_choice``: ``_choose_slot``
        of the head waiter, already made by the caller in this plan."""
        chunks = []
        while self.waiting and self._free_slots and room > 0:
            seq = self.waiting[0]
            if not self.pool.grow(seq.number, len(seq.tokens)):
                break
            self.waiting.pop(0)
            seq.slot, reused = self._take_slot(seq, trims, copies, head_choice)
            head_choice = None  # made for the head only
            seq.computed = reused
            self.prefix_hit_tokens_total += reused
            self._admissions += 1
            seq.admitted = self._admissions
            self.running.append(seq)
            count = min(len(seq.tokens) - reused, room)
            room -= count
            chunks.append(Chunk(seq, reused, count, decode=False))
        return chunks

    def _take_slot(self, seq: Sequence, trims: list[tuple[int, int]], copies: list[tuple[int, int, int]],
                   choice: tuple[int, int, int | None] | None = None) -> tuple[int, int]:
        """Take ``_choose_slot``'s slot (``choice``, when already made); note the trim of its cells
        past the reused prefix, or the copy of a running sequence's prefix into it."""
        slot, reused, source = choice if choice is not None else self._choose_slot(seq)
        self._free_slots.remove(slot)
        cached = self._cached.pop(slot, [])
        if source is not None:
            copies.append((source, slot, reused))
        elif len(cached) > reused:
            trims.append((slot, reused))
        return slot, reused

    def _choose_slot(self, seq: Sequence) -> tuple[int, int, int | None]:
        """The free slot for ``seq``, how many of its tokens it will hold without computing them,
        and the running sequence's slot to copy them from (None: the slot holds them already).

        The free slot sharing the longest prefix with it, if that is a block long or the whole
        prompt; but when a running sequence has computed a prefix longer by a block, a copy of it
        into the lowest empty slot (else the lowest free one); else that slot, holding nothing
        of it. Ties go to the lowest slot, so running sequences stay in the lowest slots (module
        docstring: compact slots)."""
        free = sorted(self._free_slots)
        limit, block = len(seq.tokens) - 1, self.pool.block_tokens
        slot, reused = -1, 0
        if self.prefix_cache:
            for candidate in free:
                shared = common_prefix(self._cached.get(candidate, []), seq.tokens, limit)
                if shared > reused:
                    slot, reused = candidate, shared
        source, copied = self._longest_running_prefix(seq, limit)
        copy = source is not None and copied >= max(reused + block, min(block, limit))
        if copy or slot < 0 or reused < min(block, limit):
            empty = [s for s in free if not self._cached.get(s)]
            slot, reused = (empty[0] if empty else free[0]), (copied if copy else 0)
        return slot, reused, source if copy else None

    def _longest_running_prefix(self, seq: Sequence, limit: int) -> tuple[int | None, int]:
        """The slot of the running sequence whose computed tokens share the longest prefix with
        ``seq`` (at most ``limit``), and its length; (None, 0) without prefix reuse or a match."""
        best: tuple[int | None, int] = (None, 0)
        if not self.prefix_cache:
            return best
        for other in self.running:
            if other.slot is not None and other.computed > best[1]:
                shared = common_prefix(other.tokens, seq.tokens, min(limit, other.computed))
                if shared > best[1]:
                    best = (other.slot, shared)
        return best
