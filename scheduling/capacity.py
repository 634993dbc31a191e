"""Capacity profiles: what one worker of a GPU type can hold and how fast it runs.

A profile is data (from the pools configuration, calibrated from published figures or measured),
read by budgets, admission and placement scorers; nothing branches on a GPU type's name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CapacityProfile:
    """One worker of ``gpu_type``.

    ``max_batch_tokens`` bounds the KV tokens (prompt plus reserved output) in flight on the
    worker and ``max_sequences`` the sequences its engine runs at once (more would wait inside the
    engine, out of the gateway's control); ``max_context_tokens`` the longest single sequence; speeds are the prior
    for ``observed tokens/s`` until the worker has been measured.

    ``decode_step_s`` and ``kv_read_s_per_token`` (optional, LLM engines) model one decode
    iteration: ``decode_step_s + kv_read_s_per_token x cached tokens`` seconds for the whole batch
    (the weights are read once per iteration, the KV cache of every sequence in it). A batch-1
    inter-token latency and its slope in context length measure them; placement's cost model uses
    them to price a request's output at the batch its length allows (``decode_s_per_token``).
    """

    gpu_type: str
    memory_gib: float
    max_batch_tokens: int
    max_context_tokens: int
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    cost_per_hour: float
    max_sequences: int = 256
    decode_step_s: float | None = None
    kv_read_s_per_token: float = 0.0
    models: frozenset[str] = frozenset()
    quantizations: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if min(self.max_batch_tokens, self.max_context_tokens, self.max_sequences) <= 0:
            raise ValueError(f"profile {self.gpu_type}: token limits must be > 0")
        if min(self.prefill_tokens_per_s, self.decode_tokens_per_s) <= 0 or self.cost_per_hour < 0:
            raise ValueError(f"profile {self.gpu_type}: speeds must be > 0 and cost >= 0")
        if (self.decode_step_s is not None and self.decode_step_s <= 0) or self.kv_read_s_per_token < 0:
            raise ValueError(f"profile {self.gpu_type}: decode_step_s must be > 0, kv_read_s_per_token >= 0")

    def supports(self, model: str) -> bool:
        return not self.models or model in self.models

    def decode_s_per_token(self, context_tokens: int, kv_capacity_tokens: int) -> float | None:
        """Seconds of engine time one output token of a sequence of ``context_tokens`` costs when the
        engine decodes as many such sequences as its KV pool (``kv_capacity_tokens``) and
        ``max_sequences`` allow: one iteration's time over that batch. None without a decode model."""
        if self.decode_step_s is None:
            return None
        context = max(1, context_tokens)
        batch = max(1, min(self.max_sequences, kv_capacity_tokens // context))
        return (self.decode_step_s + self.kv_read_s_per_token * batch * context) / batch

    @property
    def cost_per_token(self) -> float:
        """Dollars per decoded token at the profile's speed (for cost scoring)."""
        return self.cost_per_hour / 3600.0 / self.decode_tokens_per_s
