"""``gateway.yaml``: how the gateways of a stack share state, read once at the edge.

``state_store`` is ``embedded`` (in the gateway process: the default, one gateway, nothing to
install) or a Redis URL (``redis://127.0.0.1:6379/0``), which every gateway of the stack shares;
with ``start_redis`` the local stack starts a ``redis-server`` for a loopback URL when none
answers there. An absent file gives the defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlparse

from pydantic import Field, ValidationError, field_validator

from settings.base import ConfigError, StrictModel, read_yaml

Seconds = Annotated[float, Field(gt=0, le=30 * 86_400)]


class GatewaySettings(StrictModel):
    state_store: str = "embedded"
    start_redis: bool = True
    store_timeout_s: Annotated[float, Field(gt=0, le=10)] = 0.25
    status_ttl_s: Seconds = 86_400.0
    idempotency_ttl_s: Seconds = 86_400.0
    fair_share_interval_s: Annotated[float, Field(gt=0, le=60)] = 0.2
    # With a shared store: a tenant whose previous request arrived this recently is between
    # requests, not idle, and keeps its fair-queue counter (scheduling/fair_queue.py, lift_grace_s).
    fair_share_lift_grace_s: Annotated[float, Field(ge=0, le=3600)] = 2.0
    status_flush_interval_s: Annotated[float, Field(gt=0, le=10)] = 0.02
    quota_lease_s: Seconds = 900.0
    # A worker that crashes or cannot be reached: a request that has produced nothing (or a
    # generation, resumed from its last sent token) runs at most this many times in all.
    worker_attempts: Annotated[int, Field(ge=1, le=10)] = 3
    # How long a streamed response stays resumable with Last-Event-ID after its last event.
    stream_retention_s: Annotated[float, Field(gt=0, le=86_400)] = 300.0

    @field_validator("state_store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value != "embedded" and urlparse(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("state_store must be 'embedded' or a redis://, rediss:// or unix:// URL")
        return value

    @property
    def shared(self) -> bool:
        """Whether the store is shared between gateway processes (not embedded)."""
        return self.state_store != "embedded"

    @property
    def local_redis_port(self) -> int | None:
        """The port of a ``redis://`` store on this host's loopback (which the stack may start)."""
        url = urlparse(self.state_store)
        if url.scheme == "redis" and url.hostname in ("127.0.0.1", "localhost"):
            return url.port or 6379
        return None


def load_gateway_settings(path: Path) -> GatewaySettings:
    """Settings from ``path`` (defaults if it does not exist); ConfigError naming the file and field."""
    raw = read_yaml(path) if path.exists() else None
    try:
        return GatewaySettings.model_validate(raw or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
