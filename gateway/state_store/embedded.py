"""``EmbeddedStateStore``: the ``StateStore`` in this process, for a stack of one gateway (the
default; nothing to install).

The semantics are Redis's (``redis_store``): every entry expires after its ``ttl_s`` on the
injected ``clock`` (quotas and leases use the ``now`` the caller passes, like the Redis backend's
scripts), and memory is bounded by LRU caps: 100,000 request statuses, 100,000 idempotency
entries, 100,000 stream owners, 100,000 attempt counters, and per tenant the 1,000 newest request
ids that ``recent_statuses`` looks through (up to 2,000 between two trims). It is always
``healthy`` and never raises ``StoreUnavailable``.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from gateway.state_store.protocol import (
    ClaimState,
    IdempotencyClaim,
    QuotaDecision,
    QuotaRefusal,
    QuotaRelease,
    RequestRecord,
    StoredResponse,
    StreamEvent,
    StreamJournal,
)
from scheduling.admission import CONCURRENCY_RETRY_S
from scheduling.buckets import TokenBucket
from scheduling.tenants import Quotas

MAX_ENTRIES = 100_000  # per kind of entry: statuses, idempotency keys, stream owners, attempts
MAX_STREAMS = 10_000  # stream journals (each holds its stream's events)
RECENT_PER_TENANT = 1_000  # request ids per tenant that ``recent_statuses`` looks through

K = TypeVar("K")
V = TypeVar("V")


class _ExpiringLRU(Generic[K, V]):
    """A map whose entries expire at a time of the clock, holding at most ``capacity`` (the least
    recently written dropped first)."""

    def __init__(self, capacity: int, clock: Callable[[], float]) -> None:
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._capacity = capacity
        self._clock = clock

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[key]
            return None
        return entry[0]

    def put(self, key: K, value: V, ttl_s: float) -> None:
        self._entries[key] = (value, self._clock() + ttl_s)
        self._entries.move_to_end(key)
        if len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> None:
        self._entries.pop(key, None)


@dataclass
class _Idempotency:
    owner: str
    fingerprint: str
    response: StoredResponse | None = None  # None while the owner runs


@dataclass
class _Stream:
    tenant: str
    context: bytes
    events: list[StreamEvent] = dataclasses.field(default_factory=list)
    done: bool = False


@dataclass
class _QuotasState:
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None
    leases: dict[str, float] = dataclasses.field(default_factory=dict)  # request id -> lease end (now's time)


def _bucket(bucket: TokenBucket | None, capacity: float | None, rate_per_s: float) -> TokenBucket | None:
    """The tenant's bucket for these limits; when they change, its level carries over (at most the
    new capacity), as in the Redis backend."""
    if not capacity:
        return None
    if bucket is None:
        return TokenBucket(capacity, rate_per_s)
    if bucket.capacity != capacity or bucket.rate_per_s != rate_per_s:
        return TokenBucket(capacity, rate_per_s, min(bucket.level, capacity), bucket.updated_s)
    return bucket


class EmbeddedStateStore:
    """See the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._statuses: _ExpiringLRU[str, RequestRecord] = _ExpiringLRU(MAX_ENTRIES, clock)
        self._recent: defaultdict[str, dict[str, int]] = defaultdict(dict)  # tenant -> {request id: created}
        self._idempotency: _ExpiringLRU[tuple[str, str], _Idempotency] = _ExpiringLRU(MAX_ENTRIES, clock)
        self._stream_owners: _ExpiringLRU[str, str] = _ExpiringLRU(MAX_ENTRIES, clock)
        self._attempts: _ExpiringLRU[str, int] = _ExpiringLRU(MAX_ENTRIES, clock)
        self._streams: _ExpiringLRU[str, _Stream] = _ExpiringLRU(MAX_STREAMS, clock)
        self._quotas: defaultdict[str, _QuotasState] = defaultdict(_QuotasState)
        self._service: defaultdict[str, float] = defaultdict(float)  # tenant -> every gateway's service
        self._unseen: dict[str, defaultdict[str, float]] = {}  # gateway -> others' service it has not seen

    @property
    def healthy(self) -> bool:
        return True

    @property
    def name(self) -> str:
        return "embedded"

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # request status

    async def put_status(self, records: list[RequestRecord], ttl_s: float) -> None:
        for record in records:
            self._statuses.put(record.request_id, dataclasses.replace(record), ttl_s)
            recent = self._recent[record.tenant]
            recent[record.request_id] = record.created
            if len(recent) > 2 * RECENT_PER_TENANT:  # trimmed in bulk: one sort per RECENT_PER_TENANT writes
                self._recent[record.tenant] = dict(_newest_first(recent)[:RECENT_PER_TENANT])

    async def get_status(self, request_id: str) -> RequestRecord | None:
        record = self._statuses.get(request_id)
        return dataclasses.replace(record) if record is not None else None

    async def recent_statuses(self, tenant: str, status: str | None, limit: int) -> list[RequestRecord]:
        recent = self._recent.get(tenant, {})
        found: list[RequestRecord] = []
        for request_id, _ in _newest_first(recent):
            record = self._statuses.get(request_id)
            if record is None or record.tenant != tenant:
                del recent[request_id]
            elif status is None or record.status == status:
                found.append(dataclasses.replace(record))
                if len(found) >= limit:
                    break
        return found

    # idempotency

    async def claim(self, tenant: str, key: str, fingerprint: str, request_id: str,
                    ttl_s: float) -> IdempotencyClaim:
        entry = self._idempotency.get((tenant, key))
        if entry is None:
            self._idempotency.put((tenant, key), _Idempotency(request_id, fingerprint), ttl_s)
            return IdempotencyClaim(ClaimState.OWNER, request_id)
        if entry.fingerprint != fingerprint:
            return IdempotencyClaim(ClaimState.MISMATCH, entry.owner)
        if entry.response is not None:
            return IdempotencyClaim(ClaimState.DONE, entry.owner, entry.response)
        state = ClaimState.OWNER if entry.owner == request_id else ClaimState.IN_PROGRESS
        return IdempotencyClaim(state, entry.owner)

    async def complete(self, tenant: str, key: str, request_id: str, response: StoredResponse,
                       ttl_s: float) -> None:
        entry = self._idempotency.get((tenant, key))
        if entry is not None and entry.owner == request_id and entry.response is None:
            entry.response = response
            self._idempotency.put((tenant, key), entry, ttl_s)

    async def abandon(self, tenant: str, key: str, request_id: str) -> None:
        entry = self._idempotency.get((tenant, key))
        if entry is not None and entry.owner == request_id and entry.response is None:
            self._idempotency.pop((tenant, key))

    # quotas

    def _quota_state(self, tenant: str, quota: Quotas) -> _QuotasState:
        state = self._quotas[tenant]
        rps, tpm = quota.requests_per_second, quota.tokens_per_minute
        state.requests = _bucket(state.requests, max(1.0, rps) if rps else None, rps or 0.0)
        state.tokens = _bucket(state.tokens, float(tpm) if tpm else None, (tpm or 0) / 60.0)
        return state

    async def take_quota(self, tenant: str, request_id: str, quota: Quotas, cost_tokens: float, now: float,
                         lease_s: float) -> QuotaDecision:
        state = self._quota_state(tenant, quota)
        state.leases = {rid: end for rid, end in state.leases.items() if end > now}
        if quota.max_concurrent is not None and len(state.leases) >= quota.max_concurrent:
            return QuotaDecision(QuotaRefusal.MAX_CONCURRENT, CONCURRENCY_RETRY_S,
                                 {"in_flight": len(state.leases), "max_concurrent": quota.max_concurrent})
        requests, tokens = state.requests, state.tokens
        if requests is not None and requests.available(now) < 1:
            return QuotaDecision(QuotaRefusal.REQUESTS_PER_SECOND, requests.wait_s(1, now),
                                 {"requests_per_second": requests.rate_per_s})
        if tokens is not None:
            if cost_tokens > tokens.capacity:
                return QuotaDecision(QuotaRefusal.TOKENS_PER_MINUTE, None,
                                     {"cost_tokens": cost_tokens, "tokens_per_minute": tokens.capacity})
            if tokens.available(now) < cost_tokens:
                return QuotaDecision(QuotaRefusal.TOKENS_PER_MINUTE, tokens.wait_s(cost_tokens, now),
                                     {"cost_tokens": cost_tokens, "tokens_available": tokens.available(now),
                                      "tokens_per_minute": tokens.capacity})
            tokens.try_take(cost_tokens, now)
        if requests is not None:
            requests.try_take(1, now)
        if quota.max_concurrent is not None:
            state.leases[request_id] = now + lease_s
        return QuotaDecision()

    async def release_quota(self, tenant: str, request_id: str, quota: Quotas, unused_tokens: float,
                            now: float) -> None:
        state = self._quota_state(tenant, quota)
        state.leases.pop(request_id, None)
        if state.tokens is not None and unused_tokens > 0:
            state.tokens.give_back(unused_tokens, now)

    async def release_quotas(self, releases: Sequence[QuotaRelease], now: float) -> None:
        for r in releases:
            await self.release_quota(r.tenant, r.request_id, r.quota, r.unused_tokens, now)

    # fair share

    async def publish_service(self, gateway: str, deltas: dict[str, float]) -> dict[str, float]:
        """The first call of a gateway returns the service every other gateway published before."""
        if gateway not in self._unseen:
            self._unseen[gateway] = defaultdict(float, self._service)
        for tenant, delta in deltas.items():
            self._service[tenant] += delta
            for other, unseen in self._unseen.items():
                if other != gateway:
                    unseen[tenant] += delta
        seen = self._unseen[gateway]
        self._unseen[gateway] = defaultdict(float)
        return {tenant: service for tenant, service in seen.items() if service}

    # streams and retries

    async def set_stream_owner(self, request_id: str, gateway: str, ttl_s: float) -> None:
        self._stream_owners.put(request_id, gateway, ttl_s)

    async def stream_owner(self, request_id: str) -> str | None:
        return self._stream_owners.get(request_id)

    async def note_attempt(self, request_id: str, ttl_s: float) -> int:
        count = (self._attempts.get(request_id) or 0) + 1
        self._attempts.put(request_id, count, ttl_s)
        return count

    async def open_stream(self, request_id: str, tenant: str, context: bytes, ttl_s: float) -> None:
        stream = self._streams.get(request_id)
        events = stream.events if stream is not None else []
        self._streams.put(request_id, _Stream(tenant, context, events), ttl_s)

    async def append_stream(self, request_id: str, events: Sequence[StreamEvent], done: bool,
                            ttl_s: float) -> None:
        stream = self._streams.get(request_id)
        if stream is None:
            return
        recorded = len(stream.events)
        stream.events.extend(e for e in events if e.seq > recorded)  # numbered from 1: a repeat is dropped
        stream.done = stream.done or done
        self._streams.put(request_id, stream, ttl_s)

    async def read_stream(self, request_id: str, after: int) -> StreamJournal | None:
        stream = self._streams.get(request_id)
        if stream is None:
            return None
        return StreamJournal(stream.tenant, stream.context, tuple(e for e in stream.events if e.seq > after),
                             tuple(t for e in stream.events for t in e.token_ids), len(stream.events), stream.done)


def _newest_first(recent: dict[str, int]) -> list[tuple[str, int]]:
    """(request id, created) pairs, newest first, ties by request id descending (as Redis's
    ``ZREVRANGE`` orders equal scores)."""
    return sorted(recent.items(), key=lambda item: (item[1], item[0]), reverse=True)
