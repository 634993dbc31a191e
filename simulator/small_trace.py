"""A small trace for one CPU worker, derived from a real one: the first ``count`` requests of the
trace, their lengths divided and clipped to what a small model serves, their arrival pattern kept
but time-scaled to a chosen mean rate.

Contract: the same items and arguments give the same trace; the result is in arrival order,
starts at 0 s and its mean rate (``workloads.mean_rate``) is ``rate_per_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.workloads import TraceItem, mean_rate, scale_load


@dataclass(frozen=True)
class Shrink:
    """How lengths are scaled: ``round(tokens / divisor)`` clipped to ``[low, high]``."""

    divisor: float
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.divisor <= 0 or not 1 <= self.low <= self.high:
            raise ValueError("divisor must be > 0 and 1 <= low <= high")

    def apply(self, tokens: int) -> int:
        return max(self.low, min(self.high, round(tokens / self.divisor)))


def small_trace(items: Sequence[TraceItem], count: int, prompt: Shrink, output: Shrink,
                rate_per_s: float) -> list[TraceItem]:
    """See the module docstring; raise ValueError if ``items`` has fewer than two requests."""
    head = sorted(items, key=lambda i: i.arrival_s)[:count]
    if len(head) < 2 or rate_per_s <= 0:
        raise ValueError("need at least two requests and a positive rate")
    start = head[0].arrival_s
    shrunk = [TraceItem(i.arrival_s - start, prompt.apply(i.prompt_tokens), output.apply(i.output_tokens))
              for i in head]
    return scale_load(shrunk, rate_per_s / mean_rate(shrunk))
