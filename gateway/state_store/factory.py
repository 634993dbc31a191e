"""``open_state_store``: the backend that the ``state_store`` setting (``gateway.yaml``) names."""

from __future__ import annotations

from urllib.parse import urlsplit

from gateway.state_store.embedded import EmbeddedStateStore
from gateway.state_store.protocol import StateStore
from gateway.state_store.redis_store import RedisStateStore, redacted

REDIS_SCHEMES = ("redis", "rediss", "unix")


def open_state_store(url: str, timeout_s: float = 0.25, journal_timeout_s: float = 2.0) -> StateStore:
    """``embedded``, or a ``redis://``, ``rediss://`` or ``unix://`` URL (each call bounded by
    ``timeout_s``, stream journal writes by ``journal_timeout_s``); nothing is connected before ``start``."""
    if url == "embedded":
        return EmbeddedStateStore()
    if urlsplit(url).scheme in REDIS_SCHEMES:
        return RedisStateStore(url, timeout_s=timeout_s, journal_timeout_s=journal_timeout_s)
    raise ValueError(f"state_store: {redacted(url)!r} is neither 'embedded' nor a redis://, rediss:// or unix:// URL")
