"""Service-level objectives of a tier (``config/scheduling.yaml``, ``slo``), in seconds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slo:
    """Time to first token (or to the result), time per output token, and the longest a request
    may wait in the queue before it expires (``inf``: only the other objectives bound it)."""

    ttft_s: float
    tpot_s: float
    deadline_s: float = float("inf")

    def __post_init__(self) -> None:
        if min(self.ttft_s, self.tpot_s, self.deadline_s) <= 0:
            raise ValueError("SLO times must be > 0")
