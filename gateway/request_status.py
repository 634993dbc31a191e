"""What ``GET /v1/requests/{id}`` answers: each scheduled request's status, in this gateway and,
with a shared state store, in every gateway of the fleet.

A record is created when a request reaches admission and updated at dispatch and at its one
outcome. This gateway keeps its own records in a bounded LRU (the oldest dropped past
``capacity``), so it answers for its requests with no I/O and whatever the store's health. With a
shared store, changed records are written behind (``flush``, every ``flush_interval_s``, one round
trip for all of them) so that any gateway finds them; while the store is unavailable the changes
wait (bounded by the LRU) and go out once it is back. A lookup that this gateway cannot answer
asks the store. Records hold no payloads, only ids, names, times and the placement; a record of
another tenant reads as absent.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import OrderedDict

from gateway.periodic import start_periodic, stop
from gateway.state_store.protocol import RequestRecord, StateStore, StoreUnavailable
from scheduling.outcomes import Dispatch
from scheduling.requests import Request

FLUSH_BATCH = 1000
QUEUED, WAITING_FOR_CAPACITY = "queued", "waiting_for_capacity"  # the statuses of a request not yet running


class RequestStatusStore:
    def __init__(self, capacity: int = 100_000, gateway: str = "", shared: StateStore | None = None,
                 ttl_s: float = 86_400.0, flush_interval_s: float = 0.02) -> None:
        self._records: OrderedDict[str, RequestRecord] = OrderedDict()
        self._capacity = capacity
        self._gateway = gateway
        self._shared = shared
        self._ttl_s = ttl_s
        self._flush_interval_s = flush_interval_s
        self._dirty: set[str] = set()
        self._resync = False  # a write failed: rewrite everything once the store answers again
        self._flusher = None if shared is None else start_periodic(self.flush, flush_interval_s, "status-flush")

    def __len__(self) -> int:
        return len(self._records)

    async def close(self) -> None:
        await stop(self._flusher)
        with contextlib.suppress(StoreUnavailable):
            await self.flush()

    def queued(self, request: Request) -> None:
        self._records[request.request_id] = RequestRecord(
            request.request_id, request.tenant.name, request.model, request.tier.value, int(time.time()),
            gateway=self._gateway or None)
        self._changed(request.request_id)
        if len(self._records) > self._capacity:
            dropped, _ = self._records.popitem(last=False)
            self._dirty.discard(dropped)

    def waiting_for_capacity(self, request_id: str) -> None:
        """The request is held until its model, at zero replicas, has a ready worker."""
        record = self._records.get(request_id)
        if record is not None and record.outcome is None:
            record.status = WAITING_FOR_CAPACITY
            self._changed(request_id)

    def dispatched(self, dispatch: Dispatch, worker: str) -> None:
        record = self._records.get(dispatch.request_id)
        if record is not None:
            record.status, record.pool, record.worker = "running", dispatch.pool, worker
            record.queue_wait_s = round(dispatch.queue_wait_s, 6)
            self._changed(dispatch.request_id)

    def retrying(self, request_id: str, attempts: int) -> None:
        """The request's worker failed: it is queued again for attempt number ``attempts``."""
        record = self._records.get(request_id)
        if record is not None and record.outcome is None:
            record.status, record.attempts = "queued", attempts
            self._changed(request_id)

    def finished(self, request_id: str, outcome: str) -> None:
        """Record the request's one outcome (later calls do not overwrite it)."""
        record = self._records.get(request_id)
        if record is not None and record.outcome is None:
            record.outcome = outcome
            record.status = outcome.partition("(")[0]
            self._changed(request_id)

    def _changed(self, request_id: str) -> None:
        if self._shared is not None:
            self._dirty.add(request_id)

    async def flush(self) -> None:
        """Write changed records to the shared store, at most ``FLUSH_BATCH`` in one round trip;
        on failure they stay changed, and once the store is back every record this gateway holds
        is written again (a restarted store may have lost them)."""
        if self._shared is None or not self._dirty:
            return
        batch = [self._records[rid] for rid in itertools.islice(self._dirty, FLUSH_BATCH) if rid in self._records]
        self._dirty.difference_update(r.request_id for r in batch)
        try:
            await self._shared.put_status(batch, self._ttl_s)
        except StoreUnavailable:
            self._dirty.update(r.request_id for r in batch)
            self._resync = True
            return
        if self._resync:
            self._resync = False
            self._dirty.update(self._records)

    def recent(self, tenant: str, status: str | None = None, limit: int = 100,
               max_scanned: int = 10_000) -> list[RequestRecord]:
        """This gateway's newest records of the tenant (optionally only those in ``status``),
        newest first; looks at no more than ``max_scanned`` records."""
        found: list[RequestRecord] = []
        for scanned, record in enumerate(reversed(self._records.values())):
            if scanned >= max_scanned or len(found) >= limit:
                break
            if record.tenant == tenant and (status is None or record.status == status):
                found.append(record)
        return found

    def get(self, request_id: str, tenant: str) -> RequestRecord | None:
        """This gateway's record if it belongs to ``tenant``; another tenant's reads as absent."""
        record = self._records.get(request_id)
        return record if record is not None and record.tenant == tenant else None

    async def lookup(self, request_id: str, tenant: str) -> RequestRecord | None:
        """``get``, else the shared store's record (None when the store is unavailable)."""
        record = self.get(request_id, tenant)
        if record is not None or self._shared is None:
            return record
        try:
            shared = await self._shared.get_status(request_id)
        except StoreUnavailable:
            return None
        return shared if shared is not None and shared.tenant == tenant else None

    async def fleet_recent(self, tenant: str, status: str | None, limit: int) -> list[RequestRecord]:
        """The tenant's newest records across the fleet (this gateway's own when the store is
        unavailable or not shared), newest first."""
        own = self.recent(tenant, status, limit)
        if self._shared is None:
            return own
        try:
            shared = await self._shared.recent_statuses(tenant, status, limit)
        except StoreUnavailable:
            return own
        merged = {r.request_id: r for r in shared} | {r.request_id: r for r in own}
        return sorted(merged.values(), key=lambda r: r.created, reverse=True)[:limit]
