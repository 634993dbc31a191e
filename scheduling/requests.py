"""What the scheduler knows of one request: who sent it, for which model, and what it costs.

Costs are in tokens so that one tenant budget spans all workloads: an LLM request costs its
prefill tokens plus the output tokens it reserves; a batched (non-LLM) request costs its input
tokens (or rows) times the model's ``cost_factor``. Times are seconds on the driver's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scheduling.prediction.prefix_reuse import PromptPrefixes
from scheduling.tenants import Tenant, Tier


class RequestKind(StrEnum):
    """How a request occupies a worker: an LLM sequence holds KV memory; a batched request holds rows."""

    LLM = "llm"
    BATCHED = "batched"


@dataclass(frozen=True)
class Request:
    """One request as admitted, queued, placed and dispatched.

    ``deadline_s`` is the absolute time by which it must be dispatched (after it the request
    expires); ``ttft_slo_s`` the time-to-first-token objective it is placed against. ``prefixes``:
    an LLM prompt's block hashes, for engines that reuse cached prefixes (``prediction.prefix_reuse``).
    """

    request_id: str
    tenant: Tenant
    model: str
    kind: RequestKind
    arrival_s: float
    deadline_s: float
    prefill_tokens: int
    max_output_tokens: int = 0
    rows: int = 1
    cost_factor: float = 1.0
    ttft_slo_s: float | None = None
    model_version: int | None = None
    prefixes: PromptPrefixes | None = None

    def __post_init__(self) -> None:
        if self.prefill_tokens < 0 or self.max_output_tokens < 0 or self.rows < 1:
            raise ValueError("token counts must be >= 0 and rows >= 1")
        if self.deadline_s < self.arrival_s:
            raise ValueError("deadline_s must not precede arrival_s")

    @property
    def tier(self) -> Tier:
        return self.tenant.tier

    @property
    def context_tokens(self) -> int:
        """KV tokens the request may occupy at its longest (prompt plus reserved output)."""
        return self.prefill_tokens + self.max_output_tokens

    @property
    def work_units(self) -> int:
        """Prefill plus reserved output tokens; rows for a model that counts no tokens (vision)."""
        return self.prefill_tokens + self.max_output_tokens or self.rows

    @property
    def cost_tokens(self) -> float:
        """Quota cost: ``work_units`` times the model's cost factor."""
        return self.work_units * self.cost_factor

    def unused_tokens(self, generated_tokens: int) -> float:
        """Quota tokens given back when it ends: the reserved output it did not generate."""
        return max(0, self.max_output_tokens - generated_tokens) * self.cost_factor
