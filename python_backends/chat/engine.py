"""CPU reference LLM engine with continuous (iteration-level) batching over a paged KV pool.

``BatchEngine.submit(prompt, params, sink, priority, continuation)`` queues a generation; every ``step()``
asks the ``StepScheduler`` for a plan, runs it as one ``llama_decode`` (decode tokens of all running
sequences plus prefill chunks), samples one token for each sequence whose input is complete
(from its own logits row, with its own RNG) and sends the text to the sequence's sink. A
generation ends with one ``Delta`` carrying ``finish_reason`` (``stop``: end-of-generation token
or stop string; ``length``: ``max_tokens`` or the sequence limit; ``cancelled``: the sink said
so) and the usage counts; its blocks are freed in the same step, and its KV cells too unless
prefix reuse keeps them for the next sequence in its slot (``scheduler``).

Continuation (a generation resumed after its first engine died): ``continuation`` holds the ids
of the tokens that generation had sent. The sequence starts as prompt + those tokens, with the
usage and ``max_tokens`` of the whole generation; its sampler skips one draw per token (each
non-greedy sample draws one number) and its stop/UTF-8 stream is fed their text without sending
it, so what follows is exactly what the first engine would have sent next for greedy and seeded
sampling, with no text repeated or lost. Each delta carries the ids of its tokens.

Stream interval (``EngineConfig.stream_interval_tokens``, like vLLM's ``--stream-interval``): the
first text of a generation is sent at once (time to first token is unchanged), later text every
that many tokens, and whatever is held back goes with the final delta. Every send crosses from
the engine to Triton, the gateway and the client; fewer of them leave more CPU to the model on a
host where all of those share the cores. The text itself does not change, only its chunking.

Waiting bound (``EngineConfig.max_waiting``): a new generation is refused with
``EngineSaturatedError`` while that many sequences wait for admission (preempted ones included).
Triton puts no queue in front of this model (its dynamic batcher held decoupled requests; see
``triton_configs/llm.pbtxt.j2``), so this is the bound a client that bypasses the gateway meets;
the gateway itself keeps each engine's queued prefill short (``max_prefill_line_s``).

Thread contract: one thread calls everything (it owns the llama.cpp context); sinks are called
on that thread. ``generate()`` runs one request alone to completion (tests, benchmarks).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from python_backends.batching import InvalidInputError
from python_backends.chat.block_pool import BlockPool
from python_backends.chat.grammar import GrammarConstraint
from python_backends.chat.llama_runtime import BatchEntry, KvSlotError, LlamaRuntime
from python_backends.chat.params import GenerationParams
from python_backends.chat.scheduler import Chunk, SchedulerLimits, StepScheduler
from python_backends.chat.sequence import Delta, Sequence, Sink
from settings.engine import EngineConfig

__all__ = ["BatchEngine", "Delta", "EngineSaturatedError", "EngineStats", "ListSink"]


class EngineSaturatedError(RuntimeError):
    """A new generation was refused: the waiting queue is full. The message carries Triton's own
    wording for a full queue ("exceeds maximum queue size"), which the gateway maps to a 503."""

    def __init__(self, max_waiting: int) -> None:
        super().__init__(f"the engine's waiting queue is full: exceeds maximum queue size {max_waiting}")


@dataclass(frozen=True)
class EngineStats:
    """A snapshot for metrics: gauges now, counters since start."""

    kv_blocks_used: int
    kv_blocks_total: int
    kv_block_tokens: int
    running: int
    waiting: int
    preemptions_total: int
    prefill_tokens_total: int
    decode_tokens_total: int
    prefix_hit_tokens_total: int = 0
    steps_total: int = 0  # model steps run (each one llama_decode)
    step_seconds_total: float = 0.0  # wall time of those steps: planning, the model, sampling and sends
    attention_positions_total: float = 0.0  # positions the steps' tokens attended to (each to those before it)


@dataclass
class ListSink:
    """A sink that keeps every delta (tests, benchmarks, warm-up)."""

    cancel: Callable[[list[Delta]], bool] = lambda deltas: False
    deltas: list[Delta] = field(default_factory=list)
    error: Exception | None = None

    def send(self, delta: Delta) -> None:
        self.deltas.append(delta)

    def fail(self, error: Exception) -> None:
        self.error = error

    def is_cancelled(self) -> bool:
        return self.cancel(self.deltas)

    @property
    def done(self) -> bool:
        return self.error is not None or (bool(self.deltas) and self.deltas[-1].finish_reason is not None)

    @property
    def text(self) -> str:
        return "".join(d.text for d in self.deltas)


class BatchEngine:
    def __init__(self, runtime: LlamaRuntime, config: EngineConfig) -> None:
        self.runtime = runtime
        self.config = config
        self.pool = BlockPool(config.total_blocks, config.block_tokens)
        self.scheduler = StepScheduler(self.pool, SchedulerLimits(
            config.max_running, config.max_batch_tokens, config.prefill_chunk_tokens), config.prefix_cache,
            config.short_prefill_first)
        self._arrivals = 0
        self.prefill_tokens_total = 0
        self.decode_tokens_total = 0
        self.steps_total = 0
        self.step_seconds_total = 0.0
        self.attention_positions_total = 0.0

    @classmethod
    def load(cls, model_path: Path, config: EngineConfig) -> BatchEngine:
        runtime = LlamaRuntime(model_path, config.cells_per_sequence, config.max_running,
                               config.max_batch_tokens, config.n_threads, config.flash_attention)
        return cls(runtime, config)

    def tokenize(self, prompt: str) -> list[int]:
        return self.runtime.tokenize(prompt)

    def submit(self, prompt: str, params: GenerationParams, sink: Sink, priority: int = 0,
               continuation: tuple[int, ...] = ()) -> Sequence:
        """Queue a generation (resumed after ``continuation``; see the module docstring); raise
        InvalidInputError for an empty or too long prompt or a bad continuation, and
        EngineSaturatedError when ``max_waiting`` sequences already wait."""
        if len(self.scheduler.waiting) >= self.config.max_waiting:
            raise EngineSaturatedError(self.config.max_waiting)
        tokens = self.runtime.tokenize(prompt)
        if not tokens:
            raise InvalidInputError("prompt", "is empty")
        limit = self.config.sequence_limit_tokens
        if len(tokens) >= limit:
            raise InvalidInputError("prompt", f"has {len(tokens)} tokens; a sequence holds at most {limit}")
        max_new = min(params.max_tokens, limit - len(tokens))
        self._check_continuation(continuation, max_new)
        constraint = self._constraint(params, continuation)
        self._arrivals += 1
        seq = Sequence(number=self._arrivals, prompt_tokens=len(tokens), max_new_tokens=max_new,
                       priority=priority, params=params, sink=sink, tokens=tokens + list(continuation),
                       constraint=constraint)
        if continuation:
            seq.sampler.skip(len(continuation))
            for token in continuation:
                seq.stream.push(self.runtime.piece(token))  # already sent by the first engine
            seq.sent_text = True
        self.scheduler.add(seq)
        return seq

    def _constraint(self, params: GenerationParams, continuation: tuple[int, ...]) -> GrammarConstraint | None:
        """The grammar of ``params`` advanced past ``continuation`` (None when unconstrained);
        InvalidInputError for a bad grammar or a continuation it does not allow."""
        if not params.grammar:
            return None
        constraint = self.runtime.grammar(params.grammar)
        for token in continuation:
            if not constraint.allows(token):
                raise InvalidInputError("continuation", "holds a token the grammar does not allow")
            constraint.accept(token)
        return constraint

    def _check_continuation(self, continuation: tuple[int, ...], max_new_tokens: int) -> None:
        if len(continuation) >= max_new_tokens:
            raise InvalidInputError("continuation", f"has {len(continuation)} tokens; the generation may "
                                    f"produce at most {max_new_tokens}")
        if any(not 0 <= t < self.runtime.n_vocab or self.runtime.is_end(t) for t in continuation):
            raise InvalidInputError("continuation", "holds a token id outside the vocabulary or an end token")

    @property
    def has_work(self) -> bool:
        return bool(self.scheduler.running or self.scheduler.waiting)

    def stats(self) -> EngineStats:
        return EngineStats(
            kv_blocks_used=self.pool.used_blocks, kv_blocks_total=self.pool.total_blocks,
            kv_block_tokens=self.pool.block_tokens, running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting), preemptions_total=self.scheduler.preemptions_total,
            prefill_tokens_total=self.prefill_tokens_total, decode_tokens_total=self.decode_tokens_total,
            prefix_hit_tokens_total=self.scheduler.prefix_hit_tokens_total, steps_total=self.steps_total,
            step_seconds_total=self.step_seconds_total, attention_positions_total=self.attention_positions_total)

    def step(self) -> bool:
        """Run one iteration; False when there was nothing to do. A step that ran the model is
        counted with its wall time (from its planning to its last send) and what it fed, so that
        the busy time can be set against a step-time law fitted to the same features."""
        started_s = time.perf_counter()
        self._reap_cancelled()
        plan = self.scheduler.schedule()
        for slot in plan.released_slots:
            self.runtime.remove(slot)
        for slot, keep in plan.trims:
            self.runtime.trim(slot, keep)
        for source, target, keep in plan.copies:
            self.runtime.copy_prefix(source, target, keep)
        if not plan.chunks:
            return bool(plan.released_slots)
        entries = [BatchEntry(c.seq.tokens[c.start + i], _slot(c), c.start + i,
                              c.wants_logits and i == c.count - 1)
                   for c in plan.chunks for i in range(c.count)]
        try:
            rows = iter(self.runtime.decode(entries))
        except KvSlotError:  # the pool's headroom should prevent this; recover, never crash
            victim_slot = self.scheduler.preempt_one()
            if victim_slot is not None:
                self.runtime.remove(victim_slot)
            return True
        for chunk in plan.chunks:
            self.attention_positions_total += chunk.count * chunk.start + chunk.count * (chunk.count - 1) / 2
            chunk.seq.computed += chunk.count
            if chunk.decode:
                self.decode_tokens_total += chunk.count
            else:
                self.prefill_tokens_total += chunk.count
            if chunk.wants_logits:
                self._accept(chunk.seq, chunk.seq.sampler.sample(next(rows), chunk.seq.constraint))
        self.steps_total += 1
        self.step_seconds_total += time.perf_counter() - started_s
        return True

    def fail_all(self) -> list[Sequence]:
        """Drop every sequence (after an engine error) and clear the cache; return them."""
        dropped = [*self.scheduler.running, *self.scheduler.waiting]
        for seq in dropped:
            self._release(seq)
        for slot in self.scheduler.forget_cached():
            self.runtime.remove(slot)
        return dropped

    def generate(self, prompt: str, params: GenerationParams, sink: ListSink | None = None,
                 priority: int = 0, continuation: tuple[int, ...] = ()) -> ListSink:
        """Run one generation to its end (other queued work runs along); return its sink."""
        sink = sink or ListSink()
        self.submit(prompt, params, sink, priority, continuation)
        while not sink.done and self.step():
            pass
        return sink

    def _reap_cancelled(self) -> None:
        for seq in [*self.scheduler.running, *self.scheduler.waiting]:
            if seq.sink.is_cancelled():
                self._finish(seq, "cancelled")

    def _accept(self, seq: Sequence, token: int) -> None:
        """Take one sampled token: end, stop string, text, or length limit."""
        if self.runtime.is_end(token):
            self._finish(seq, "stop")
            return
        if seq.constraint is not None:
            seq.constraint.accept(token)
        seq.tokens.append(token)
        seq.unsent_text += seq.stream.push(self.runtime.piece(token))
        seq.unsent_tokens += 1
        seq.unsent_ids.append(token)
        if seq.stream.stopped:
            self._finish(seq, "stop")
        elif seq.generated >= seq.max_new_tokens:
            self._finish(seq, "length")
        elif seq.unsent_text and (not seq.sent_text or seq.unsent_tokens >= self.config.stream_interval_tokens):
            seq.sink.send(Delta(seq.unsent_text, token_ids=tuple(seq.unsent_ids)))
            seq.unsent_text, seq.unsent_tokens, seq.sent_text = "", 0, True
            seq.unsent_ids = []

    def _finish(self, seq: Sequence, reason: str) -> None:
        self._release(seq)
        seq.finish_reason = reason
        text, seq.unsent_text = seq.unsent_text + seq.stream.flush(), ""
        ids, seq.unsent_ids = tuple(seq.unsent_ids), []
        seq.sink.send(Delta(text, reason, seq.prompt_tokens, seq.generated, ids))

    def _release(self, seq: Sequence) -> None:
        slot = self.scheduler.finish(seq)
        if slot is not None:
            self.runtime.remove(slot)


def _slot(chunk: Chunk) -> int:
    assert chunk.seq.slot is not None, "a planned sequence holds a slot"
    return chunk.seq.slot
