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
    """

    gpu_type: str
    memory_gib: float
    max_batch_tokens: int
    max_context_tokens: int
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    cost_per_hour: float
    max_sequences: int = 256
    models: frozenset[str] = frozenset()
    quantizations: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if min(self.max_batch_tokens, self.max_context_tokens, self.max_sequences) <= 0:
            raise ValueError(f"profile {self.gpu_type}: token limits must be > 0")
        if min(self.prefill_tokens_per_s, self.decode_tokens_per_s) <= 0 or self.cost_per_hour < 0:
            raise ValueError(f"profile {self.gpu_type}: speeds must be > 0 and cost >= 0")

    def supports(self, model: str) -> bool:
        return not self.models or model in self.models

    @property
    def cost_per_token(self) -> float:
        """Dollars per decoded token at the profile's speed (for cost scoring)."""
        return self.cost_per_hour / 3600.0 / self.decode_tokens_per_s
