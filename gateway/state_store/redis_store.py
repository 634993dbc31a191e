"""``RedisStateStore``: the ``StateStore`` that every gateway of a fleet shares, on one Redis
(``redis.asyncio``; not Redis Cluster: a script's keys are not hash-tagged into one slot).

Key layout (under the prefix ``shunter:``); every key has a TTL:

- ``shunter:req:<request id>``: string, the ``RequestRecord`` as JSON; TTL ``ttl_s``.
- ``shunter:tenant:<tenant>:reqs``: sorted set of the tenant's request ids scored by ``created``,
  the newest 1,000 kept; TTL the ``ttl_s`` of its last write.
- ``shunter:idem:<tenant>:<sha256 of the key>``: hash ``owner``, ``fingerprint``, ``state``
  (running | done) and once done ``status``, ``body`` (the bytes), ``media_type``, ``headers``
  (JSON pairs), ``request_id``; TTL ``ttl_s``.
- ``shunter:bucket:<tenant>:requests``, ``shunter:bucket:<tenant>:tokens``: hash ``{level, t}``,
  the bucket as of ``t`` (the callers' ``now``); absent means full, so each lives until it would
  be full again, plus a minute.
- ``shunter:conc:<tenant>``: sorted set of the request ids holding a concurrency slot, scored by
  lease end (``now + lease_s``); TTL its last lease plus a minute.
- ``shunter:fair:total``: hash tenant -> weighted service of every gateway, cumulative;
  ``shunter:fair:gateway:<gateway>``: hash tenant -> that gateway's; both 7 days after the
  gateway's last publication.
- ``shunter:stream:<request id>``: string, the gateway that holds the request's stream; TTL ``ttl_s``.
- ``shunter:attempts:<request id>``: integer, the request's attempts; TTL ``ttl_s`` of the last.
- ``shunter:sse:<request id>``: hash ``tenant``, ``context``, ``done`` (0 | 1);
  ``shunter:sse:<request id>:events``: list of JSON ``[seq, data, token ids]``; both the ``ttl_s``
  of the journal's last write.

Multi-step updates are atomic: Lua scripts (``scripts/*.lua``, registered once) for idempotency,
quotas and fair share, MULTI/EXEC for statuses and attempts. The idempotency key is hashed, so a
client's arbitrary bytes never form a Redis key. ``publish_service`` returns what the other
gateways added since this gateway's previous call; this object remembers per gateway what it last
saw, so the first call (after a start) returns the others' whole totals so far, and a fleet whose
totals expired starts again from zero.

Stream calls (``open_stream``, ``append_stream``, ``read_stream``, ``set_stream_owner``,
``stream_owner``) go on their own connections, bounded by ``journal_timeout_s`` (longer: a
stream's events wait for them, ``gateway/stream_journal.py``, and a reconnect reads them); a failed
one raises ``StoreUnavailable`` but neither marks the store unavailable nor waits for a probe.

Availability: every other call is bounded by ``timeout_s`` (socket timeouts, no client retries, and
``asyncio.timeout`` around the whole call). A connection error, a timeout or any other Redis
error marks the store unavailable and raises ``StoreUnavailable`` (no Redis exception escapes);
while unavailable, calls raise at once without touching the network, except that at most one
call per ``retry_interval_s`` goes through as a probe, and its success makes the store available
again. Each transition logs one warning. ``start`` probes once and does not raise: a gateway
starts on its local view while Redis is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from gateway.state_store.embedded import RECENT_PER_TENANT
from gateway.state_store.protocol import (
    ClaimState,
    IdempotencyClaim,
    QuotaDecision,
    QuotaRefusal,
    QuotaRelease,
    RequestRecord,
    StoredResponse,
    StoreUnavailable,
    StreamEvent,
    StreamJournal,
)
from scheduling.admission import CONCURRENCY_RETRY_S
from scheduling.tenants import Quotas

log = logging.getLogger(__name__)

T = TypeVar("T")

FAIR_SHARE_TTL_S = 7 * 86_400.0
_MGET_PAGE = 200  # records read per round trip by ``recent_statuses``


def redacted(url: str) -> str:
    """The URL without its password (in the authority or, for ``unix://``, the query)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = "&".join("password=***" if field.startswith("password=") else field for field in parts.query.split("&"))
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def _script(*names: str) -> str:
    folder = resources.files("gateway.state_store") / "scripts"
    return "\n".join((folder / name).read_text() for name in names)


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _limit(value: float | None) -> float | str:
    """A limit as a script argument: '' for none (scripts/buckets.lua's ``limit``)."""
    return value if value else ""


def _record(raw: bytes | str) -> RequestRecord:
    return RequestRecord(**orjson.loads(raw))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _floats(flat: list[bytes]) -> dict[str, float]:
    return {flat[i].decode(): float(flat[i + 1]) for i in range(0, len(flat), 2)}


class RedisStateStore:
    """See the module docstring."""

    def __init__(self, url: str, timeout_s: float = 0.25, retry_interval_s: float = 1.0,
                 prefix: str = "shunter:", journal_timeout_s: float = 2.0) -> None:
        self._client = Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                      retry=Retry(NoBackoff(), 0))
        self._journal_client = Redis.from_url(url, socket_timeout=journal_timeout_s,
                                              socket_connect_timeout=journal_timeout_s, retry=Retry(NoBackoff(), 0))
        self._journal_timeout_s = journal_timeout_s
        self._name = redacted(url)
        self._timeout_s = timeout_s
        self._retry_interval_s = retry_interval_s
        self._prefix = prefix
        self._healthy = True
        self._next_try_s = 0.0  # time.monotonic() from which an unavailable store may be probed
        self._others_seen: dict[str, dict[str, float]] = {}  # gateway -> others' totals at its last call
        register = self._client.register_script
        self._claim = register(_script("claim.lua"))
        self._complete = register(_script("complete.lua"))
        self._abandon = register(_script("abandon.lua"))
        self._take = register(_script("buckets.lua", "take_quota.lua"))
        self._release = register(_script("buckets.lua", "release_quota.lua"))
        self._publish = register(_script("publish_service.lua"))

    @property
    def healthy(self) -> bool:
        return self._healthy

    @property
    def name(self) -> str:
        return self._name

    async def start(self) -> None:
        with contextlib.suppress(StoreUnavailable):  # logged; the gateway serves from its local view
            await self._call(self._client.ping)

    async def close(self) -> None:
        for client in (self._client, self._journal_client):
            try:
                await client.aclose()
            except (RedisError, OSError) as exc:
                log.debug("closing %s: %r", self._name, exc)

    async def _call(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run one bounded operation; see the module docstring's availability rules."""
        probe = not self._healthy
        if probe:
            if time.monotonic() < self._next_try_s:
                raise StoreUnavailable(f"state store {self._name} is unavailable")
            self._next_try_s = time.monotonic() + self._retry_interval_s
        try:
            async with asyncio.timeout(self._timeout_s):
                result = await operation()
        except (RedisError, OSError, TimeoutError) as exc:
            if self._healthy:
                self._healthy = False
                self._next_try_s = time.monotonic() + self._retry_interval_s
                log.warning("state store %s unavailable (%r); gateways use their local view, retrying every %.1f s",
                            self._name, exc, self._retry_interval_s)
            raise StoreUnavailable(f"state store {self._name} is unavailable: {exc!r}") from exc
        if probe and not self._healthy:
            self._healthy = True
            log.warning("state store %s available again", self._name)
        return result

    async def _journal_call(self, operation: Callable[[Redis], Awaitable[T]]) -> T:
        """One stream call on the journal's connections, bounded by ``journal_timeout_s``."""
        try:
            async with asyncio.timeout(self._journal_timeout_s):
                return await operation(self._journal_client)
        except (RedisError, OSError, TimeoutError) as exc:
            raise StoreUnavailable(f"state store {self._name} did not record a stream journal: {exc!r}") from exc

    def _key(self, *parts: str) -> str:
        return self._prefix + ":".join(parts)

    # request status

    async def put_status(self, records: list[RequestRecord], ttl_s: float) -> None:
        if not records:
            return
        ttl_ms = _ms(ttl_s)

        async def write() -> None:
            pipe = self._client.pipeline(transaction=True)
            for record in records:
                pipe.set(self._key("req", record.request_id), orjson.dumps(record), px=ttl_ms)
                pipe.zadd(self._key("tenant", record.tenant, "reqs"), {record.request_id: record.created})
            for tenant in {record.tenant for record in records}:
                recent = self._key("tenant", tenant, "reqs")
                pipe.zremrangebyrank(recent, 0, -RECENT_PER_TENANT - 1)
                pipe.pexpire(recent, ttl_ms)
            await pipe.execute()

        await self._call(write)

    async def get_status(self, request_id: str) -> RequestRecord | None:
        raw = await self._call(lambda: self._client.get(self._key("req", request_id)))
        return _record(raw) if raw is not None else None

    async def recent_statuses(self, tenant: str, status: str | None, limit: int) -> list[RequestRecord]:
        async def read() -> list[RequestRecord]:
            ids: list[Any] = await self._client.zrevrange(self._key("tenant", tenant, "reqs"), 0, -1)
            found: list[RequestRecord] = []
            page = max(limit, _MGET_PAGE)
            for start in range(0, len(ids), page):
                keys = [self._key("req", _text(rid)) for rid in ids[start:start + page]]
                for raw in await self._client.mget(keys):
                    record = _record(raw) if raw is not None else None
                    if record is not None and record.tenant == tenant and (status is None or record.status == status):
                        found.append(record)
                        if len(found) >= limit:
                            return found
            return found

        return await self._call(read)

    # idempotency

    def _idempotency_key(self, tenant: str, key: str) -> str:
        return self._key("idem", tenant, hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest())

    async def claim(self, tenant: str, key: str, fingerprint: str, request_id: str,
                    ttl_s: float) -> IdempotencyClaim:
        keys = [self._idempotency_key(tenant, key)]
        result = await self._call(lambda: self._claim(keys=keys, args=[fingerprint, request_id, _ms(ttl_s)]))
        state, owner = ClaimState(result[0].decode()), result[1].decode()
        if state is not ClaimState.DONE:
            return IdempotencyClaim(state, owner)
        status, body, media_type, headers, produced_by = result[2:7]
        pairs = tuple((name, value) for name, value in orjson.loads(headers))
        return IdempotencyClaim(state, owner, StoredResponse(int(status), bytes(body), media_type.decode(), pairs,
                                                             produced_by.decode()))

    async def complete(self, tenant: str, key: str, request_id: str, response: StoredResponse,
                       ttl_s: float) -> None:
        keys = [self._idempotency_key(tenant, key)]
        args: list[Any] = [request_id, response.status, response.body, response.media_type,
                orjson.dumps(list(response.headers)), response.request_id, _ms(ttl_s)]
        await self._call(lambda: self._complete(keys=keys, args=args))

    async def abandon(self, tenant: str, key: str, request_id: str) -> None:
        keys = [self._idempotency_key(tenant, key)]
        await self._call(lambda: self._abandon(keys=keys, args=[request_id]))

    # quotas

    async def take_quota(self, tenant: str, request_id: str, quota: Quotas, cost_tokens: float, now: float,
                         lease_s: float) -> QuotaDecision:
        keys = [self._key("conc", tenant), self._key("bucket", tenant, "requests"),
                self._key("bucket", tenant, "tokens")]
        max_concurrent = "" if quota.max_concurrent is None else quota.max_concurrent
        args: list[Any] = [repr(now), request_id, repr(lease_s), max_concurrent, _limit(quota.requests_per_second),
                _limit(quota.tokens_per_minute), repr(float(cost_tokens)), repr(CONCURRENCY_RETRY_S)]
        result = await self._call(lambda: self._take(keys=keys, args=args))
        if not result:
            return QuotaDecision()
        reason, retry_after, signals = result[0].decode(), result[1], result[2:]
        return QuotaDecision(QuotaRefusal(reason), float(retry_after) if retry_after else None,
                             _floats(signals))

    async def release_quota(self, tenant: str, request_id: str, quota: Quotas, unused_tokens: float,
                            now: float) -> None:
        await self.release_quotas([QuotaRelease(tenant, request_id, quota, unused_tokens)], now)

    async def release_quotas(self, releases: Sequence[QuotaRelease], now: float) -> None:
        """One pipeline (not a transaction: each release is atomic in its own script)."""
        if not releases:
            return

        async def release_all() -> None:
            pipe = self._client.pipeline(transaction=False)
            for r in releases:
                keys = [self._key("conc", r.tenant), self._key("bucket", r.tenant, "tokens")]
                args = [r.request_id, repr(now), _limit(r.quota.tokens_per_minute), repr(float(r.unused_tokens))]
                await self._release(keys=keys, args=args, client=pipe)
            await pipe.execute()

        await self._call(release_all)

    # fair share

    async def publish_service(self, gateway: str, deltas: dict[str, float]) -> dict[str, float]:
        keys = [self._key("fair", "total"), self._key("fair", "gateway", gateway)]
        args: list[Any] = [_ms(FAIR_SHARE_TTL_S)]
        for tenant, delta in deltas.items():
            if delta and math.isfinite(delta):
                args += [tenant, repr(delta)]
        existed, totals_flat, own_flat = await self._call(lambda: self._publish(keys=keys, args=args))
        totals, own = _floats(totals_flat), _floats(own_flat)
        others = {tenant: total - own.get(tenant, 0.0) for tenant, total in totals.items()}
        seen = self._others_seen.get(gateway, {}) if existed else {}
        self._others_seen[gateway] = others
        added = {tenant: service - seen.get(tenant, 0.0) for tenant, service in others.items()}
        # the totals are sums of floats: a difference within their rounding is no service
        return {tenant: service for tenant, service in added.items()
                if abs(service) > 1e-9 * max(1.0, abs(totals[tenant]))}

    # streams and retries

    async def set_stream_owner(self, request_id: str, gateway: str, ttl_s: float) -> None:
        await self._journal_call(lambda client: client.set(self._key("stream", request_id), gateway, px=_ms(ttl_s)))

    async def stream_owner(self, request_id: str) -> str | None:
        owner = await self._journal_call(lambda client: client.get(self._key("stream", request_id)))
        return _text(owner) if owner is not None else None

    async def note_attempt(self, request_id: str, ttl_s: float) -> int:
        key = self._key("attempts", request_id)

        async def count() -> int:
            pipe = self._client.pipeline(transaction=True)
            pipe.incr(key)
            pipe.pexpire(key, _ms(ttl_s))
            attempts, _ = await pipe.execute()
            return int(attempts)

        return await self._call(count)

    # stream journals

    async def open_stream(self, request_id: str, tenant: str, context: bytes, ttl_s: float) -> None:
        meta, events, ttl_ms = self._key("sse", request_id), self._key("sse", request_id, "events"), _ms(ttl_s)

        async def write(client: Redis) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.hset(meta, mapping={"tenant": tenant, "context": context, "done": 0})
            pipe.pexpire(meta, ttl_ms)
            pipe.pexpire(events, ttl_ms)
            await pipe.execute()

        await self._journal_call(write)

    async def append_stream(self, request_id: str, events: Sequence[StreamEvent], done: bool,
                            ttl_s: float) -> None:
        meta, listed, ttl_ms = self._key("sse", request_id), self._key("sse", request_id, "events"), _ms(ttl_s)

        async def write(client: Redis) -> None:  # one round trip; events of a journal never opened expire unread
            pipe = client.pipeline(transaction=True)
            if events:
                pipe.rpush(listed, *(orjson.dumps([e.seq, e.data, list(e.token_ids)]) for e in events))
            if done:
                pipe.hset(meta, "done", 1)
            pipe.pexpire(meta, ttl_ms)
            pipe.pexpire(listed, ttl_ms)
            await pipe.execute()

        await self._journal_call(write)

    async def read_stream(self, request_id: str, after: int) -> StreamJournal | None:
        meta, listed = self._key("sse", request_id), self._key("sse", request_id, "events")

        async def read(client: Redis) -> StreamJournal | None:
            pipe = client.pipeline(transaction=True)
            pipe.hgetall(meta)
            pipe.lrange(listed, 0, -1)
            fields, raw_events = await pipe.execute()
            if not fields:
                return None
            values = {_text(k): v for k, v in fields.items()}
            parsed, seen = [], set()
            for raw in raw_events:  # an append retried after a timeout may have landed twice: first wins
                entry = orjson.loads(raw)
                if entry[0] not in seen:
                    seen.add(entry[0])
                    parsed.append(entry)
            events = tuple(StreamEvent(int(seq), str(data), tuple(int(t) for t in ids))
                           for seq, data, ids in parsed if int(seq) > after)
            return StreamJournal(_text(values["tenant"]), bytes(values["context"]), events,
                                 tuple(int(t) for _, _, ids in parsed for t in ids), len(parsed),
                                 _text(values["done"]) == "1")

        return await self._journal_call(read)
