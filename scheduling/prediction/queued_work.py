"""The work queued in the gateway, per model, tier and tenant, for admission's wait estimate.

``ahead_of(request)`` is the work the queue will serve before ``request``: every higher tier's
backlog, its own tenant's earlier requests, and, with a fair queue, from each other tenant of its
tier only what that tenant is served while ``request``'s tenant works through its own backlog (its
weighted share of it: the fair queue interleaves tenants by service, so a light tenant is not
predicted to wait behind a heavy one's whole backlog). Without fairness (``fair=False``) the whole
tier's backlog is ahead.

Work is a small vector (``Work``): expected cost units (what the fair share is measured in),
prompt tokens still to prefill (less what an engine's prefix cache is predicted to hold), KV
tokens reserved (prompt plus maximum output) and requests. The share of another tenant's backlog
that is ahead is taken of every component alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.fair_queue import TIERS_IN_ORDER
from scheduling.requests import Request, RequestKind
from scheduling.tenants import Tier

Band = tuple[str, Tier]


@dataclass(frozen=True)
class Work:
    """An amount of queued work; ``units`` are expected cost tokens (prompt plus expected output,
    times the cost factor), ``prefill_tokens`` and ``kv_tokens`` count LLM requests only."""

    units: float = 0.0
    prefill_tokens: float = 0.0
    kv_tokens: float = 0.0
    requests: float = 0.0

    @staticmethod
    def of(request: Request, units: float, prompt_tokens: float | None = None) -> Work:
        """``request``'s work; ``prompt_tokens``: of its prompt what must be prefilled (default all)."""
        if request.kind is not RequestKind.LLM:
            return Work(units, 0.0, 0.0, 1.0)
        prefill = request.prefill_tokens if prompt_tokens is None else prompt_tokens
        return Work(units, prefill, request.context_tokens, 1.0)

    def __add__(self, other: Work) -> Work:
        return Work(self.units + other.units, self.prefill_tokens + other.prefill_tokens,
                    self.kv_tokens + other.kv_tokens, self.requests + other.requests)

    def __sub__(self, other: Work) -> Work:
        return Work(self.units - other.units, self.prefill_tokens - other.prefill_tokens,
                    self.kv_tokens - other.kv_tokens, self.requests - other.requests)

    def scaled(self, factor: float) -> Work:
        return Work(self.units * factor, self.prefill_tokens * factor, self.kv_tokens * factor,
                    self.requests * factor)


NO_WORK = Work()


@dataclass
class QueuedWork:
    fair: bool = True
    _bands: dict[Band, dict[str, Work]] = field(default_factory=dict)
    _weights: dict[str, float] = field(default_factory=dict)
    _entries: dict[str, tuple[Band, str, Work]] = field(default_factory=dict)

    def add(self, request: Request, units: float, prompt_tokens: float | None = None) -> None:
        band, tenant = (request.model, request.tier), request.tenant.name
        tenants = self._bands.setdefault(band, {})
        work = Work.of(request, units, prompt_tokens)
        tenants[tenant] = tenants.get(tenant, NO_WORK) + work
        self._weights[tenant] = request.tenant.weight
        self._entries[request.request_id] = (band, tenant, work)

    def remove(self, request_id: str) -> None:
        entry = self._entries.pop(request_id, None)
        if entry is None:
            return
        band, tenant, work = entry
        tenants = self._bands[band]
        left = tenants.get(tenant, NO_WORK) - work
        if left.requests > 0.5:
            tenants[tenant] = left
        else:
            tenants.pop(tenant, None)

    def band_total(self, model: str, tier: Tier) -> Work:
        total = NO_WORK
        for work in self._bands.get((model, tier), {}).values():
            total = total + work
        return total

    def ahead_of(self, request: Request, units: float) -> Work:
        """Work served before ``request`` (not yet queued) of ``units``; see the module docstring."""
        rank = TIERS_IN_ORDER.index(request.tier)
        ahead = NO_WORK
        for tier in TIERS_IN_ORDER[:rank]:
            ahead = ahead + self.band_total(request.model, tier)
        tenants = self._bands.get((request.model, request.tier), {})
        if not self.fair:
            return ahead + self.band_total(request.model, request.tier)
        name, weight = request.tenant.name, request.tenant.weight
        own = tenants.get(name, NO_WORK)
        for other, queued in tenants.items():
            if other != name and queued.units > 0:
                served = (own.units + units) * self._weights[other] / weight
                ahead = ahead + queued.scaled(min(1.0, served / queued.units))
        return ahead + own
