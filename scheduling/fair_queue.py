"""The fair queue: strict bands by tier, virtual token counters per tenant inside a band, earliest
deadline first inside a tenant (``README.md``, "Scheduling: admission, fair queue, deadlines,
placement").

Service counter (VTC): a tenant's counter grows by ``(input_weight * prefill + output_weight *
output) * cost_factor / weight`` for each request dispatched (output counted as reserved, then
corrected by ``refund`` at completion). Among the backlogged tenants of the highest non-empty
band, the one with the least counter is served. A tenant that becomes backlogged is lifted to the
least counter of the band's backlogged tenants (and at most their largest), so idling banks no
credit and old service is no debt; hence two backlogged tenants' counters differ by at most the
largest single charge, and their service over any interval both are backlogged by at most twice it.
With ``lift_grace_s`` > 0 a tenant whose previous request arrived at most that long before is not
lifted: it was between requests, not idle. Gateways that share their counters need this, since a
closed-loop client's queue empties between its requests, and each lift would reset the service
that other gateways counted for the tenants it is lifted among (``gateway/fair_share.py``).

Minimum shares between bands (``min_share``, per tier; no starvation across tiers): a lower band
that has been backlogged since some moment and has received less than ``min_share[tier]`` of all
the cost dispatched since then is *owed* and goes before the higher bands until it has its share.
Costs are the un-normalised charges (tokens x cost factor, not divided by tenant weight). So over
any interval a band stays backlogged, its dispatched cost is at least ``min_share x`` the total
minus one request's cost; under sustained higher-tier load at a pool dispatch rate of ``D`` cost
per second, the head of a backlogged band whose own band has ``Q`` cost queued before it (its own
included) is dispatched within ``(Q + c_max) / (min_share x D)`` seconds, ``c_max`` being the
largest single request's cost, provided a worker can take its lane. The higher bands lose at most
``min_share`` of the dispatch while the lower one is backlogged, which is what the premium
objectives must be sized for (``min_dispatch_share`` in ``scheduling.yaml``).

``candidates(blocked)`` yields, in service order (owed bands first, then the bands in tier order),
the head entry for each (model, regions) lane that the caller has not marked blocked: the driver
places the first it can and marks the lanes it cannot, so a request never overtakes an earlier one
of the same lane, while another model's requests are not held behind a full worker.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from scheduling.requests import Request
from scheduling.tenants import Tier

TIERS_IN_ORDER = (Tier.PREMIUM, Tier.STANDARD, Tier.BATCH)
Lane = tuple[str, frozenset[str]]


def lane_of(request: Request) -> Lane:
    """Requests of one lane compete for the same workers."""
    return request.model, request.tenant.allowed_regions


@dataclass(order=True)
class _Entry:
    deadline_s: float
    seq: int
    request: Request = field(compare=False)


@dataclass
class _TenantQueue:
    lanes: dict[Lane, list[_Entry]] = field(default_factory=dict)
    size: int = 0

    def push(self, entry: _Entry) -> None:
        heapq.heappush(self.lanes.setdefault(lane_of(entry.request), []), entry)
        self.size += 1

    def first_seq(self) -> int:
        """Arrival order of the tenant's oldest queued head (ties between equal counters)."""
        return min((heap[0].seq for heap in self.lanes.values() if heap), default=0)

    def heads(self) -> list[_Entry]:
        return sorted(heap[0] for heap in self.lanes.values() if heap)


@dataclass
class FairQueue:
    input_weight: float = 1.0
    output_weight: float = 2.0
    lift_grace_s: float = 0.0  # a tenant whose previous request arrived this recently is not lifted
    min_share: Mapping[Tier, float] = field(default_factory=dict)  # a backlogged band's least share of dispatch
    counters: dict[str, float] = field(default_factory=dict)
    _tenants: dict[str, _TenantQueue] = field(default_factory=dict)
    _band_of: dict[str, Tier] = field(default_factory=dict)
    _where: dict[str, _Entry] = field(default_factory=dict)
    _last_arrival_s: dict[str, float] = field(default_factory=dict)
    _band_size: dict[Tier, int] = field(default_factory=dict)
    _band_cost: dict[Tier, float] = field(default_factory=dict)  # cost dispatched to each band, ever
    _total_cost: float = 0.0
    _backlog_base: dict[Tier, tuple[float, float]] = field(default_factory=dict)  # (total, band) when backlogged
    _seq: int = 0

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._where

    def charge_of(self, request: Request, output_tokens: int | None = None) -> float:
        """Counter increment for ``request`` (reserved output unless ``output_tokens`` is given)."""
        output = request.max_output_tokens if output_tokens is None else output_tokens
        units = self.input_weight * request.prefill_tokens + self.output_weight * output
        if request.prefill_tokens + request.max_output_tokens == 0:
            units = self.input_weight * request.rows
        return units * request.cost_factor / request.tenant.weight

    def push(self, request: Request) -> None:
        name = request.tenant.name
        queue = self._tenants.setdefault(name, _TenantQueue())
        if queue.size == 0 and not self._between_requests(name, request.arrival_s):
            self._lift(name, request.tier)
        self._last_arrival_s[name] = request.arrival_s
        self._band_of[name] = request.tier
        if self._band_size.get(request.tier, 0) == 0:  # the band becomes backlogged: its share counts from now
            self._backlog_base[request.tier] = (self._total_cost, self._band_cost.get(request.tier, 0.0))
        self._band_size[request.tier] = self._band_size.get(request.tier, 0) + 1
        self._seq += 1
        entry = _Entry(request.deadline_s, self._seq, request)
        queue.push(entry)
        self._where[request.request_id] = entry

    def _between_requests(self, tenant: str, arrival_s: float) -> bool:
        """With a lift grace, whether the tenant's previous request arrived at most that long ago."""
        return self.lift_grace_s > 0 and arrival_s - self._last_arrival_s.get(tenant, -math.inf) <= self.lift_grace_s

    def _lift(self, tenant: str, tier: Tier) -> None:
        """Lift a tenant that becomes backlogged to the least counter of the band's backlogged
        tenants, and keep it at most at their largest: idling banks no credit, and past service
        cannot hold a returning tenant back further than the band's spread."""
        active = [self.counters.get(t, 0.0) for t, q in self._tenants.items()
                  if q.size > 0 and self._band_of.get(t) is tier and t != tenant]
        own = self.counters.get(tenant, 0.0)
        self.counters[tenant] = min(max(own, min(active)), max(active)) if active else own

    def remove(self, request_id: str) -> Request | None:
        entry = self._where.pop(request_id, None)
        if entry is None:
            return None
        queue = self._tenants[entry.request.tenant.name]
        heap = queue.lanes[lane_of(entry.request)]
        heap.remove(entry)
        heapq.heapify(heap)
        queue.size -= 1
        self._band_size[entry.request.tier] -= 1
        return entry.request

    def charge(self, request: Request) -> None:
        """Count a dispatched request against its tenant's counter (output as reserved)."""
        self._count(request, self.charge_of(request))

    def uncharge(self, request: Request) -> None:
        """Take back a dispatched request's whole charge (its worker failed; it is queued again)."""
        self._count(request, -self.charge_of(request))

    def refund(self, request: Request, generated_tokens: int) -> None:
        """Correct the reservation once the real output length is known."""
        unused = max(0, request.max_output_tokens - generated_tokens)
        if unused and request.max_output_tokens:
            self._count(request, -self.output_weight * unused * request.cost_factor / request.tenant.weight)

    def _count(self, request: Request, charge: float) -> None:
        """Add ``charge`` (weighted) to the tenant's counter and its cost to the band shares."""
        name = request.tenant.name
        self.counters[name] = self.counters.get(name, 0.0) + charge
        cost = charge * request.tenant.weight
        self._total_cost += cost
        self._band_cost[request.tier] = self._band_cost.get(request.tier, 0.0) + cost

    def owed(self, tier: Tier) -> bool:
        """Whether ``tier``'s band is backlogged and short of its ``min_share`` since it became so."""
        share = self.min_share.get(tier, 0.0)
        if share <= 0 or self._band_size.get(tier, 0) == 0:
            return False
        total_at, band_at = self._backlog_base.get(tier, (0.0, 0.0))
        return self._band_cost.get(tier, 0.0) - band_at < share * (self._total_cost - total_at)

    def bands_in_service_order(self) -> list[Tier]:
        """Owed bands (in tier order), then the others in tier order."""
        owed = [tier for tier in TIERS_IN_ORDER if self.owed(tier)]
        return owed + [tier for tier in TIERS_IN_ORDER if tier not in owed]

    def _tenants_in_service_order(self, tier: Tier) -> list[str]:
        backlogged = [t for t, q in self._tenants.items() if q.size > 0 and self._band_of[t] is tier]
        return sorted(backlogged, key=lambda t: (self.counters.get(t, 0.0), self._tenants[t].first_seq(), t))

    def candidates(self, blocked: Callable[[Lane], bool]) -> Iterator[Request]:
        """Heads of unblocked lanes in service order; see the module docstring."""
        for tier in self.bands_in_service_order():
            for tenant in self._tenants_in_service_order(tier):
                for entry in self._tenants[tenant].heads():
                    if not blocked(lane_of(entry.request)):
                        yield entry.request

    def queued(self) -> Iterator[Request]:
        """Every queued request, in no particular order."""
        return (entry.request for entry in self._where.values())

    def ordered(self) -> list[Request]:
        """All queued requests in (approximate) service order: band, tenant counter, deadline."""
        order = {tier: i for i, tier in enumerate(TIERS_IN_ORDER)}
        return sorted((e.request for e in self._where.values()),
                      key=lambda r: (order[r.tier], self.counters.get(r.tenant.name, 0.0),
                                     self._where[r.request_id].deadline_s, self._where[r.request_id].seq))
