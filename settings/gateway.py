"""``gateway.yaml``: how the gateways of a stack share state, read once at the edge.

``state_store`` is ``embedded`` (in the gateway process: the default, one gateway, nothing to
install) or a Redis URL (``redis://127.0.0.1:6379/0``), which every gateway of the stack shares;
with ``start_redis`` the local stack starts a ``redis-server`` for a loopback URL when none
answers there. The ``replicas_*`` and ``cold_start_s`` fields tune the gateway's side of autoscaling.
An absent file gives the defaults.

Hostile input is bounded here too: ``max_body_bytes`` (every route but KServe inference) and
``max_kserve_body_bytes`` (KServe v2 inference, binary tensors) are enforced while the body is
read, after the API key is checked and before anything is parsed (413); the JSON in a body may
hold at most ``max_json_objects`` objects and ``max_json_values`` values (400); ``max_inputs_per_request``
caps embedding inputs and rerank documents, ``max_request_tokens`` the tokens one embeddings or
rerank request may count; tokenisation runs on ``tokenizer_threads`` threads, off the event loop.
``/metrics`` can require a bearer token (``metrics_token_file``, relative to the config folder)
and can be moved to an address of its own (``metrics_listen``, ``host:port``), where only it and
the health endpoints answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlparse

from pydantic import Field, ValidationError, field_validator

from settings.base import ConfigError, StrictModel, read_yaml

Seconds = Annotated[float, Field(gt=0, le=30 * 86_400)]
Bytes = Annotated[int, Field(ge=1024, le=1 << 30)]
MIB = 1 << 20


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
    # Autoscaling (gateway/replicas.py, gateway/capacity.py): control's replicas document is polled this
    # often and trusted this long after its last answer (then the gateway routes on Triton readiness
    # alone); cold_start_s predicts a model's start from zero when control gives no prediction.
    replicas_poll_interval_s: Annotated[float, Field(gt=0, le=60)] = 1.0
    replicas_stale_after_s: Annotated[float, Field(gt=0, le=600)] = 5.0
    cold_start_s: Annotated[float, Field(ge=0, le=3600)] = 10.0
    max_body_bytes: Bytes = 4 * MIB
    max_kserve_body_bytes: Bytes = 64 * MIB
    max_json_objects: Annotated[int, Field(ge=16, le=10_000_000)] = 4096
    max_json_values: Annotated[int, Field(ge=16, le=100_000_000)] = 100_000
    max_inputs_per_request: Annotated[int, Field(ge=1, le=100_000)] = 2048
    max_request_tokens: Annotated[int, Field(ge=1, le=100_000_000)] = 262_144
    tokenizer_threads: Annotated[int, Field(ge=1, le=64)] = 2
    metrics_token_file: Path | None = None
    metrics_listen: str | None = None
    # A worker that crashes or cannot be reached: a request that has produced nothing (or a
    # generation, resumed from its last sent token) runs at most this many times in all.
    worker_attempts: Annotated[int, Field(ge=1, le=10)] = 3
    # How long a streamed response stays resumable with Last-Event-ID after its last event.
    stream_retention_s: Annotated[float, Field(gt=0, le=86_400)] = 300.0
    # A streamed event is sent once the Redis journal holds it; an append may take this long, then
    # the stream goes on unrecorded (and cannot be resumed).
    stream_journal_timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0

    @field_validator("state_store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        if value != "embedded" and urlparse(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError("state_store must be 'embedded' or a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("metrics_listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, _, port = value.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError("metrics_listen must be 'host:port', e.g. 127.0.0.1:9090")
        return value

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """``metrics_listen`` as (host, port), or None when /metrics is served on the gateway port."""
        if self.metrics_listen is None:
            return None
        host, _, port = self.metrics_listen.rpartition(":")
        return host.strip("[]"), int(port)

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


def read_metrics_token(settings: GatewaySettings, config_dir: Path) -> str | None:
    """The bearer token ``/metrics`` requires (``metrics_token_file``, relative to ``config_dir``),
    or None when it is open; ConfigError if the file cannot be read or is empty."""
    if settings.metrics_token_file is None:
        return None
    path = config_dir / settings.metrics_token_file  # an absolute path stays as it is
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"gateway.yaml: metrics_token_file: cannot read {path}: {exc}") from exc
    if not token:
        raise ConfigError(f"gateway.yaml: metrics_token_file: {path} is empty")
    return token


def load_gateway_settings(path: Path) -> GatewaySettings:
    """Settings from ``path`` (defaults if it does not exist); ConfigError naming the file and field."""
    raw = read_yaml(path) if path.exists() else None
    try:
        return GatewaySettings.model_validate(raw or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
