"""``observability.yaml``: access logs and tracing, read once at the edge by the gateway and control.

``access_log``: one JSON line per request (``settings/access_log.py`` writes it), on by default,
into ``<state_dir>/logs/<process>.access.jsonl`` (or stdout, ``to: stdout``), rotated at ``max_bytes`` keeping
``backup_count`` old files. ``tracing``: OpenTelemetry spans, exported over OTLP/HTTP to
``otlp_endpoint`` (e.g. ``http://127.0.0.1:4318``) only when it is set; off by default, and then
no tracer is created at all. An absent file gives the defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator

from settings.base import ConfigError, StrictModel, read_yaml

MIB = 1 << 20


class AccessLogSettings(StrictModel):
    enabled: bool = True
    to: Literal["file", "stdout"] = "file"  # stdout: for containers, whose log collector rotates
    max_bytes: Annotated[int, Field(ge=64 * 1024, le=1 << 40)] = 64 * MIB
    backup_count: Annotated[int, Field(ge=0, le=1000)] = 5


class TracingSettings(StrictModel):
    otlp_endpoint: str | None = None  # OTLP/HTTP base URL; None: tracing off
    service_name_prefix: str = "shunter"
    sample_ratio: Annotated[float, Field(ge=0, le=1)] = 1.0  # of root spans (a client's sampled flag wins)

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("otlp_endpoint must be an http:// or https:// URL (OTLP over HTTP)")
        return value

    @property
    def enabled(self) -> bool:
        return self.otlp_endpoint is not None


class ObservabilitySettings(StrictModel):
    access_log: AccessLogSettings = AccessLogSettings()
    tracing: TracingSettings = TracingSettings()


def load_observability(path: Path) -> ObservabilitySettings:
    """Settings from ``path`` (defaults if it does not exist); ConfigError naming the file and field."""
    raw = read_yaml(path) if path.exists() else None
    try:
        return ObservabilitySettings.model_validate(raw or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
