"""The work queued in the gateway, per model, tier and tenant, for admission's wait estimate.

``ahead_of(request)`` is the work the queue will serve before ``request``: every higher tier's
backlog, its own tenant's earlier requests, and, with a fair queue, from each other tenant of its
tier only what that tenant is served while ``request``'s tenant works through its own backlog (its
weighted share of it: the fair queue interleaves tenants by service, so a light tenant is not
predicted to wait behind a heavy one's whole backlog). Without fairness (``fair=False``) the whole
tier's backlog is ahead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.fair_queue import TIERS_IN_ORDER
from scheduling.requests import Request
from scheduling.tenants import Tier

Band = tuple[str, Tier]


@dataclass
class QueuedWork:
    fair: bool = True
    _bands: dict[Band, dict[str, float]] = field(default_factory=dict)
    _weights: dict[str, float] = field(default_factory=dict)
    _entries: dict[str, tuple[Band, str, float]] = field(default_factory=dict)

    def add(self, request: Request, units: float) -> None:
        band, tenant = (request.model, request.tier), request.tenant.name
        tenants = self._bands.setdefault(band, {})
        tenants[tenant] = tenants.get(tenant, 0.0) + units
        self._weights[tenant] = request.tenant.weight
        self._entries[request.request_id] = (band, tenant, units)

    def remove(self, request_id: str) -> None:
        entry = self._entries.pop(request_id, None)
        if entry is None:
            return
        band, tenant, units = entry
        tenants = self._bands[band]
        left = tenants.get(tenant, 0.0) - units
        if left > 1e-9:
            tenants[tenant] = left
        else:
            tenants.pop(tenant, None)

    def band_total(self, model: str, tier: Tier) -> float:
        return sum(self._bands.get((model, tier), {}).values())

    def ahead_of(self, request: Request, units: float) -> float:
        """Work units served before ``request`` (not yet queued) of ``units``; see the module docstring."""
        rank = TIERS_IN_ORDER.index(request.tier)
        ahead = sum(self.band_total(request.model, tier) for tier in TIERS_IN_ORDER[:rank])
        tenants = self._bands.get((request.model, request.tier), {})
        if not self.fair:
            return ahead + sum(tenants.values())
        name, weight = request.tenant.name, request.tenant.weight
        own = tenants.get(name, 0.0)
        for other, queued in tenants.items():
            if other != name:
                ahead += min(queued, (own + units) * self._weights[other] / weight)
        return ahead + own
