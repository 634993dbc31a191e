"""``Idempotency-Key``: (tenant, key) -> the request id of the first request that used it.

A bounded LRU in this process. The durable, shared store and the replay semantics of the IETF
draft (a repeat answered with the first request's result) belong to the state store, which is not
built yet: today a repeated key is recorded, and the request runs again.
"""

from __future__ import annotations

from collections import OrderedDict


class IdempotencyLedger:
    def __init__(self, capacity: int = 100_000) -> None:
        self._entries: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._capacity = capacity

    def remember(self, tenant: str, key: str, request_id: str) -> str:
        """Store ``request_id`` under the key unless present; return the stored request id."""
        entry = (tenant, key)
        if entry in self._entries:
            self._entries.move_to_end(entry)
            return self._entries[entry]
        self._entries[entry] = request_id
        if len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return request_id
