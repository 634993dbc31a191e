"""What an LLM worker model needs from a timing model: the engine's limits and the time of one
iteration. Two implementations: ``gpu.LlmPerf`` (a GPU from published figures) and
``fitted.FittedPerf`` (a real engine measured by a bench command).

``EngineLimits`` are the engine's scheduling settings (they decide which tokens an iteration
holds); ``IterationWork`` is what one iteration feeds. The worker (``llm_worker``) plans
iterations from the limits and asks the model only ``iteration_s(work)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class EngineLimits:
    """How an engine batches.

    ``max_sequences``: sequences running at once; ``step_token_budget``: tokens per iteration
    (decodes plus prompt chunks); ``prefill_chunk_tokens``: prompt tokens per iteration;
    ``kv_pool_tokens`` in blocks of ``kv_block_tokens`` (allocated on demand, ``llm_worker``).
    ``short_prefill_first``: while sequences decode, a waiting prompt that fits one chunk gets an
    iteration of its own (no decodes), never two such iterations in a row (the CPU chat engine's
    ``short_prefill_first``). ``priority_admission``: waiting sequences are admitted by tier
    (premium first), then by when they were first queued, and a preempted one goes back to that
    place (the CPU chat engine's ``Sequence.waiting_key``, fed the gateway's tier as its
    ``priority`` input); otherwise in arrival order with preempted ones at the head (vLLM's FCFS).
    """

    max_sequences: int
    step_token_budget: int
    prefill_chunk_tokens: int
    kv_pool_tokens: int
    kv_block_tokens: int = 16
    short_prefill_first: bool = False
    priority_admission: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.max_sequences < self.step_token_budget:
            raise ValueError("max_sequences must be in 1..step_token_budget-1")
        if min(self.prefill_chunk_tokens, self.kv_block_tokens) < 1 or self.kv_pool_tokens < 0:
            raise ValueError("prefill_chunk_tokens and kv_block_tokens must be >= 1, kv_pool_tokens >= 0")


@dataclass(frozen=True)
class IterationWork:
    """One iteration: prompt chunks as ``(start position, tokens)``, ``decode_seqs`` decoding
    sequences whose contexts sum to ``decode_context_tokens``, and ``kv_tokens`` cached tokens
    in the running sequences (the KV an iteration reads). ``resting_decoders``: decoding sequences
    that sit this iteration out (a short-prefill-first one); the engine does no work for them, but
    their previous tokens' responses are still on their way out while it runs. ``start_s``: when
    it starts (virtual seconds), for a model whose speed changes over a run."""

    prefill_chunks: tuple[tuple[int, int], ...]
    decode_seqs: int
    decode_context_tokens: int
    kv_tokens: int
    resting_decoders: int = 0
    start_s: float = 0.0

    @property
    def prefill_tokens(self) -> int:
        return sum(count for _, count in self.prefill_chunks)

    @property
    def prefill_context(self) -> int:
        """The longest context a chunk reaches (its start plus its tokens); 0 without chunks."""
        return max((start + count for start, count in self.prefill_chunks), default=0)


class LlmPerfModel(Protocol):
    """The timing model an ``LlmWorker`` runs on."""

    @property
    def limits(self) -> EngineLimits: ...

    def iteration_s(self, work: IterationWork) -> float: ...
