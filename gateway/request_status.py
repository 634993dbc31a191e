"""What ``GET /v1/requests/{id}`` answers: each scheduled request's status, bounded in memory.

A record is created when a request reaches admission and updated at dispatch and at its one
outcome. The oldest records are dropped past ``capacity`` (an LRU), so memory stays bounded under
any load; a dropped or never-seen id reads as not found. Records hold no payloads, only ids,
names, times and the placement.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from scheduling.outcomes import Dispatch
from scheduling.requests import Request


@dataclass
class RequestRecord:
    request_id: str
    tenant: str
    model: str
    tier: str
    created: int
    status: str = "queued"
    outcome: str | None = None
    pool: str | None = None
    worker: str | None = None
    queue_wait_s: float | None = None

    def public(self) -> dict[str, object]:
        return {"id": self.request_id, "object": "request", "model": self.model, "tier": self.tier,
                "created": self.created, "status": self.status, "outcome": self.outcome,
                "pool": self.pool, "queue_wait_s": self.queue_wait_s}


class RequestStatusStore:
    def __init__(self, capacity: int = 100_000) -> None:
        self._records: OrderedDict[str, RequestRecord] = OrderedDict()
        self._capacity = capacity

    def __len__(self) -> int:
        return len(self._records)

    def queued(self, request: Request) -> None:
        self._records[request.request_id] = RequestRecord(
            request.request_id, request.tenant.name, request.model, request.tier.value, int(time.time()))
        if len(self._records) > self._capacity:
            self._records.popitem(last=False)

    def dispatched(self, dispatch: Dispatch, worker: str) -> None:
        record = self._records.get(dispatch.request_id)
        if record is not None:
            record.status, record.pool, record.worker = "running", dispatch.pool, worker
            record.queue_wait_s = round(dispatch.queue_wait_s, 6)

    def finished(self, request_id: str, outcome: str) -> None:
        """Record the request's one outcome (later calls do not overwrite it)."""
        record = self._records.get(request_id)
        if record is not None and record.outcome is None:
            record.outcome = outcome
            record.status = outcome.partition("(")[0]

    def recent(self, tenant: str, status: str | None = None, limit: int = 100,
               max_scanned: int = 10_000) -> list[RequestRecord]:
        """The tenant's newest records (optionally only those in ``status``), newest first; looks
        at no more than ``max_scanned`` records."""
        found: list[RequestRecord] = []
        for scanned, record in enumerate(reversed(self._records.values())):
            if scanned >= max_scanned or len(found) >= limit:
                break
            if record.tenant == tenant and (status is None or record.status == status):
                found.append(record)
        return found

    def get(self, request_id: str, tenant: str) -> RequestRecord | None:
        """The record if it exists and belongs to ``tenant``; another tenant's reads as absent."""
        record = self._records.get(request_id)
        return record if record is not None and record.tenant == tenant else None
