"""What several gateways share: one protocol, ``StateStore``, with an embedded and a Redis backend.

Each gateway keeps serving from its own memory; the store is where what must hold across
gateways lives:

- **request status** (``RequestRecord``): written as a request moves (queued, running, its one
  outcome), read by ``GET /v1/requests/{id}`` on any gateway; only the tenant that sent a request
  may read it (the caller filters by tenant, the store keeps the tenant in the record);
- **idempotency** (IETF ``Idempotency-Key`` draft): ``claim`` either makes this request the owner
  of (tenant, key), or says a request with that key is still running, has finished (its stored
  response), or had another body; the owner ``complete``s with the response to replay, or
  ``abandon``s so a retry may run;
- **quotas across gateways**: ``take_quota`` takes one request, ``cost_tokens`` tokens and one
  concurrency slot from the tenant's fleet-wide budget (token buckets with the same capacities
  and rates as the scheduling core's: requests ``max(1, rps)`` refilled at ``rps``/s, tokens
  ``tokens_per_minute`` refilled at ``tokens_per_minute/60``/s), or refuses with the reason and how
  long to wait; ``release_quota`` gives back the slot and the tokens not used;
- **fair share**: each gateway ``publish_service`` of its tenants' weighted service since its
  last publication and gets back what the other gateways served since it last asked;
- **stream ownership and retries**: which gateway holds a request's stream, and how many
  attempts a request has made;
- **stream journals** (resumable SSE): the events a stream has sent, with their numbers and
  the token ids whose text each carries, and what a resume needs to continue the generation
  (``context``, the route's own bytes), so that a client reconnecting with ``Last-Event-ID`` to
  any gateway gets the rest of its stream.

Contract for every backend: every key expires (``ttl_s``); each call is bounded in time and never
raises for an unavailable backend: it raises ``StoreUnavailable``, which the gateway turns into
its local view (never a 500), and ``healthy`` says which state the backend is in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from scheduling.tenants import Quotas


class StoreUnavailable(Exception):
    """The backend did not answer in time or is down; the caller falls back to its local view."""


@dataclass
class RequestRecord:
    """One request's status as ``GET /v1/requests/{id}`` shows it (no payloads: ids, names, times)."""

    request_id: str
    tenant: str
    model: str
    tier: str
    created: int  # unix seconds
    status: str = "queued"  # queued | waiting_for_capacity | running | the outcome (completed, rejected, ...)
    outcome: str | None = None  # the outcome label, e.g. ``rejected(rate_limited)``
    pool: str | None = None
    worker: str | None = None
    queue_wait_s: float | None = None
    gateway: str | None = None  # the gateway process that holds it
    attempts: int = 1  # dispatches: more than one when a worker failed and the request was sent again

    def public(self) -> dict[str, object]:
        return {"id": self.request_id, "object": "request", "model": self.model, "tier": self.tier,
                "created": self.created, "status": self.status, "outcome": self.outcome,
                "pool": self.pool, "queue_wait_s": self.queue_wait_s, "attempts": self.attempts}


@dataclass(frozen=True)
class StoredResponse:
    """A finished non-streamed response, replayed byte for byte to a repeat of its request."""

    status: int
    body: bytes
    media_type: str
    headers: tuple[tuple[str, str], ...] = ()  # response headers worth replaying (e.g. x-shunter-pool)
    request_id: str = ""  # the request that produced it


class ClaimState(StrEnum):
    OWNER = "owner"  # no live entry: this request runs and must complete or abandon the key
    IN_PROGRESS = "in_progress"  # the first request with this key is still running -> 409
    DONE = "done"  # the first request finished: replay ``response``
    MISMATCH = "mismatch"  # the key was used with another body -> 422


@dataclass(frozen=True)
class IdempotencyClaim:
    state: ClaimState
    request_id: str  # the request that owns the key (this one when OWNER)
    response: StoredResponse | None = None  # when DONE


@dataclass(frozen=True)
class QuotaRelease:
    """What one ended request gives back: its concurrency slot and the tokens it did not use."""

    tenant: str
    request_id: str
    quota: Quotas
    unused_tokens: float


class QuotaRefusal(StrEnum):
    MAX_CONCURRENT = "max_concurrent"
    REQUESTS_PER_SECOND = "requests_per_second"
    TOKENS_PER_MINUTE = "tokens_per_minute"


@dataclass(frozen=True)
class QuotaDecision:
    """``refused`` None: taken (and must be released once); else the reason, with how long to wait
    and the numbers behind it."""

    refused: QuotaRefusal | None = None
    retry_after_s: float | None = None
    signals: dict[str, float] = field(default_factory=dict)

    @property
    def taken(self) -> bool:
        return self.refused is None


@dataclass(frozen=True)
class StreamEvent:
    """One SSE event of a resumable stream: its number (from 1), its data, and the ids of the
    tokens whose text it carries."""

    seq: int
    data: str
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class StreamJournal:
    """A stream as ``read_stream(request_id, after)`` finds it: the events numbered after
    ``after``, the token ids of every event recorded, the number of events recorded, and whether
    the stream has ended (its ``[DONE]`` or error event is recorded)."""

    tenant: str
    context: bytes
    events: tuple[StreamEvent, ...]
    token_ids: tuple[int, ...]
    length: int
    done: bool


class StateStore(Protocol):
    """See the module docstring; ``now`` is unix time in seconds, passed in by the caller."""

    @property
    def healthy(self) -> bool:
        """False while the backend is unreachable (calls raise ``StoreUnavailable`` fast)."""
        ...

    @property
    def name(self) -> str:
        """``embedded`` or the backend's URL without credentials, for ``/readyz`` and metrics."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def put_status(self, records: list[RequestRecord], ttl_s: float) -> None:
        """Write (replace) these records, in one round trip."""

    async def get_status(self, request_id: str) -> RequestRecord | None: ...

    async def recent_statuses(self, tenant: str, status: str | None, limit: int) -> list[RequestRecord]:
        """The tenant's newest records (``status`` filters), newest first."""
        ...

    async def claim(self, tenant: str, key: str, fingerprint: str, request_id: str,
                    ttl_s: float) -> IdempotencyClaim:
        """Claim (tenant, key) for ``request_id`` whose body hashes to ``fingerprint``; atomic."""
        ...

    async def complete(self, tenant: str, key: str, request_id: str, response: StoredResponse,
                       ttl_s: float) -> None:
        """Store the owner's response (only if ``request_id`` still owns the key)."""

    async def abandon(self, tenant: str, key: str, request_id: str) -> None:
        """Drop the owner's claim (only if ``request_id`` still owns it), so a retry may run."""

    async def take_quota(self, tenant: str, request_id: str, quota: Quotas, cost_tokens: float, now: float,
                         lease_s: float) -> QuotaDecision:
        """Take one request, ``cost_tokens`` and one concurrency slot (held by ``request_id`` for
        at most ``lease_s``, so a gateway that dies cannot hold slots forever) from the tenant's
        fleet-wide budget; all or nothing, atomic across gateways."""
        ...

    async def release_quota(self, tenant: str, request_id: str, quota: Quotas, unused_tokens: float,
                            now: float) -> None:
        """Give back ``request_id``'s slot and the tokens it did not use."""

    async def release_quotas(self, releases: Sequence[QuotaRelease], now: float) -> None:
        """``release_quota`` for many requests in one round trip."""

    async def publish_service(self, gateway: str, deltas: dict[str, float]) -> dict[str, float]:
        """Add this gateway's per-tenant service since its last call; return the service the other
        gateways added since this gateway's previous call (per tenant)."""
        ...

    async def set_stream_owner(self, request_id: str, gateway: str, ttl_s: float) -> None: ...

    async def stream_owner(self, request_id: str) -> str | None: ...

    async def note_attempt(self, request_id: str, ttl_s: float) -> int:
        """Count one more attempt of the request; return the count (1 for the first)."""
        ...

    async def open_stream(self, request_id: str, tenant: str, context: bytes, ttl_s: float) -> None:
        """Start (or restart, keeping its events) the journal of a stream."""

    async def append_stream(self, request_id: str, events: Sequence[StreamEvent], done: bool,
                            ttl_s: float) -> None:
        """Append events (numbered after those recorded) to an open journal; ``done`` when the
        last of them ends the stream. Every key of the journal then lives ``ttl_s`` more."""

    async def read_stream(self, request_id: str, after: int) -> StreamJournal | None:
        """The journal with its events numbered after ``after``; None if none is open."""
        ...
