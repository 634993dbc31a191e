"""``RedisStateStore`` when Redis is down, silent or misused: bounded calls, ``StoreUnavailable``
only, fast failures between probes, one warning per transition, recovery by a probe."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from control.redis_server import LocalRedis
from gateway.state_store.protocol import StoreUnavailable
from gateway.state_store.redis_store import RedisStateStore

pytestmark = pytest.mark.integration

TIMEOUT_S = 0.5
RETRY_S = 1.0
LOGGER = "gateway.state_store.redis_store"
HOST = "127.0.0.1"


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


async def timed_failure(store: RedisStateStore) -> float:
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await store.note_attempt("r1", 60)
    return time.monotonic() - started


@pytest.fixture
def free_port() -> int:
    """A port where nothing listens (yet)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((HOST, 0))
        listener.listen(8)
        yield listener.getsockname()[1]


async def test_a_store_with_no_server_fails_fast_and_recovers_when_redis_starts(
        free_port: int, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    port = free_port
    store = RedisStateStore(f"redis://:secret@{HOST}:{port}/0", timeout_s=TIMEOUT_S, retry_interval_s=RETRY_S)
    assert store.name == f"redis://:***@{HOST}:{port}/0"
    await store.start()  # does not raise: the gateway starts on its local view
    assert not store.healthy
    assert await timed_failure(store) < 0.05  # within retry_interval_s of start's probe: no network
    await asyncio.sleep(RETRY_S)
    assert await timed_failure(store) < TIMEOUT_S  # a probe: refused by the closed port
    assert await timed_failure(store) < 0.05
    assert len(warnings_logged(caplog)) == 1
    redis = LocalRedis(port, tmp_path, ready_timeout_s=10.0)
    redis.start()
    try:
        await asyncio.sleep(RETRY_S)
        assert await store.note_attempt("r1", 60) == 1
        assert store.healthy
        assert await store.note_attempt("r1", 60) == 2
        await store.close()
    finally:
        redis.stop()
    logged = warnings_logged(caplog)
    assert len(logged) == 2
    assert "unavailable" in logged[0] and "available again" in logged[1]
    assert all("secret" not in line for line in logged)


async def test_a_silent_server_fails_within_the_timeout(silent_port: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    store = RedisStateStore(f"redis://{HOST}:{silent_port}/0", timeout_s=TIMEOUT_S, retry_interval_s=RETRY_S)
    assert store.healthy
    assert await timed_failure(store) < TIMEOUT_S + 0.25
    assert not store.healthy
    assert await timed_failure(store) < 0.05
    assert len(warnings_logged(caplog)) == 1
    await store.close()


async def test_a_redis_error_reply_is_raised_as_store_unavailable(redis_url: str) -> None:
    admin = Redis.from_url(redis_url)
    await admin.flushdb()
    await admin.hset("shunter:attempts:r1", "not", "a counter")
    await admin.aclose()
    store = RedisStateStore(redis_url, timeout_s=2.0, retry_interval_s=0.01)
    with pytest.raises(StoreUnavailable):
        await store.note_attempt("r1", 60)
    await asyncio.sleep(0.02)
    assert await store.note_attempt("r2", 60) == 1
    assert store.healthy
    await store.close()
