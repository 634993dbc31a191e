"""``open_state_store`` picks the backend that the ``state_store`` setting names."""

from __future__ import annotations

import pytest

from gateway.state_store.embedded import EmbeddedStateStore
from gateway.state_store.factory import open_state_store
from gateway.state_store.redis_store import RedisStateStore, redacted


def test_embedded_is_the_in_process_store() -> None:
    store = open_state_store("embedded")
    assert isinstance(store, EmbeddedStateStore)
    assert (store.name, store.healthy) == ("embedded", True)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://cache.example:6380/1",
                                 "unix:///run/redis/redis.sock?db=2"])
def test_redis_urls_open_the_redis_store_without_connecting(url: str) -> None:
    store = open_state_store(url, timeout_s=0.1)
    assert isinstance(store, RedisStateStore)
    assert store.name == url


@pytest.mark.parametrize("url", ["", "memory", "http://127.0.0.1:6379", "postgresql://db/shunter"])
def test_anything_else_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(ValueError, match="state_store"):
        open_state_store(url)


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:pw@host:6379/0", "redis://:***@host:6379/0"),
    ("rediss://user:pw@host:6380/1", "rediss://user:***@host:6380/1"),
    ("unix:///run/redis.sock?db=0&password=pw", "unix:///run/redis.sock?db=0&password=***"),
    ("redis://host:6379/0", "redis://host:6379/0"),
])
def test_the_name_never_shows_the_password(url: str, shown: str) -> None:
    assert redacted(url) == shown
