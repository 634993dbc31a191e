"""What happened to each simulated request: one mutable record per request, filled in by the
driver as the request moves (admitted, dispatched, first token, finished or another outcome)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.outcomes import Outcome
from scheduling.requests import Request
from scheduling.slo import Slo
from scheduling.tenants import Tier


@dataclass(frozen=True)
class SimRequest:
    """A request as the workload produced it, with the output length it will really generate."""

    request: Request
    output_tokens: int


@dataclass
class RequestRecord:
    request_id: str
    tenant: str
    tier: Tier
    weight: float
    arrival_s: float
    prefill_tokens: int
    output_tokens: int
    slo: Slo
    outcome: Outcome | None = None  # set once, when the request ends
    reason: str = ""
    dispatch_s: float | None = None
    worker_id: str = ""
    first_token_s: float | None = None
    finish_s: float | None = None
    generated: int = 0

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        if self.finish_s is None or self.first_token_s is None:
            return None
        return (self.finish_s - self.first_token_s) / max(1, self.generated - 1)

    @property
    def met_slo(self) -> bool:
        """Completed, with TTFT and TPOT within the tier's objectives."""
        ttft, tpot = self.ttft_s, self.tpot_s
        return (self.outcome is Outcome.COMPLETED and ttft is not None and tpot is not None
                and ttft <= self.slo.ttft_s and tpot <= self.slo.tpot_s)
