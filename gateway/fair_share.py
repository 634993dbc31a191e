"""Fair share across gateways: the fair queue's virtual token counters count every gateway's service,
not only this one's.

Every ``interval_s``, ``sync()`` publishes how much each tenant's counter grew here since the last
publication (service, refunds and lifts alike) and adds to the local counters what the other
gateways published meanwhile (``Scheduler.add_service``). Between two syncs a gateway does not see
the others' service, so on top of the one-gateway bound (two backlogged tenants' counters differ by
at most the largest single charge) the fleet adds at most the weighted service the whole fleet
gives in one interval plus one store round trip (measured: ``python -m bench
studies.fleet_fairness``). While the store is unavailable the growth keeps accumulating here and is
published when it returns.

The fair queue lifts a tenant that becomes backlogged to the least counter of the backlogged ones,
which would throw away the service other gateways counted each time a closed-loop client's queue
empties between two requests; so with a shared store the scheduler runs with a lift grace
(``gateway.yaml`` ``fair_share_lift_grace_s``): a tenant whose previous request came that recently
is not lifted. ``python -m bench studies.fleet_fairness`` measures both.
"""

from __future__ import annotations

from gateway.state_store.protocol import StateStore, StoreUnavailable
from scheduling.scheduler import Scheduler


class FairShareSync:
    def __init__(self, scheduler: Scheduler, store: StateStore, gateway_id: str) -> None:
        self._scheduler = scheduler
        self._store = store
        self._gateway_id = gateway_id
        self._published: dict[str, float] = {}  # counters as of the last sync, the others' service included

    async def sync(self) -> None:
        counters = self._scheduler.service_counters()
        grown = {t: c - self._published.get(t, 0.0) for t, c in counters.items() if c != self._published.get(t, 0.0)}
        try:
            others = await self._store.publish_service(self._gateway_id, grown)
        except StoreUnavailable:
            return
        self._scheduler.add_service(others)
        self._published = {t: counters.get(t, 0.0) + others.get(t, 0.0) for t in counters.keys() | others.keys()}
