"""``backend``: each ``StateStore`` backend under one interface, for the contract tests.

The embedded store runs on a fake clock that ``advance`` moves; the Redis store (integration) runs
on the session's ``redis-server``, flushed before each test, and ``advance`` waits in real time.
``another()`` is the store of a second gateway: for Redis a second client on the same server, for
the embedded store (one process) the same object.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from gateway.state_store.embedded import EmbeddedStateStore
from gateway.state_store.protocol import StateStore
from gateway.state_store.redis_store import RedisStateStore
from tests.unit.gateway.state_store.backends import Backend, FakeClock

TEST_TIMEOUT_S = 2.0  # generous: the tests share the machine with other work


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.integration)])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    if request.param == "embedded":
        clock = FakeClock()
        embedded = EmbeddedStateStore(clock)

        async def advance(seconds: float) -> None:
            clock.now += seconds

        async def same() -> StateStore:
            return embedded

        yield Backend(embedded, advance, same)
        return
    url = request.getfixturevalue("redis_url")
    admin = Redis.from_url(url)
    await admin.flushdb()
    await admin.aclose()
    opened: list[RedisStateStore] = []

    async def another() -> StateStore:
        store = RedisStateStore(url, timeout_s=TEST_TIMEOUT_S)
        await store.start()
        opened.append(store)
        return store

    first = await another()
    yield Backend(first, asyncio.sleep, another)
    for store in opened:
        await store.close()
