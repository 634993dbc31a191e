"""The control plane's settings (``config/control.yaml``), read once at the edge.

``load_control_settings(path, state_dir)`` validates the file and resolves its relative paths
against ``state_dir``; an absent file gives the defaults (the embedded setup: a SQLite registry
file, a local artifact directory, keys under the state directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from settings.base import ConfigError, StrictModel, read_yaml


class RolloutSettings(StrictModel):
    ready_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 300.0
    routing_applied_timeout_s: Annotated[float, Field(gt=0, le=60)] = 5.0
    drain_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 300.0


class CanarySettings(StrictModel):
    """When the canary analysis rolls a candidate back (see ``control/canary_analysis.py``)."""

    interval_s: Annotated[float, Field(gt=0, le=600)] = 5.0
    window_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    min_requests: Annotated[int, Field(ge=1)] = 20
    max_error_rate_delta: Annotated[float, Field(ge=0, le=1)] = 0.05
    max_latency_ratio: Annotated[float, Field(gt=1)] = 2.0
    min_latency_delta_s: Annotated[float, Field(ge=0, le=600)] = 0.05

    def thresholds(self) -> dict[str, float]:
        return {"min_requests": float(self.min_requests), "max_error_rate_delta": self.max_error_rate_delta,
                "max_latency_ratio": self.max_latency_ratio, "min_latency_delta_s": self.min_latency_delta_s,
                "window_s": self.window_s}


class ReplicaSettings(StrictModel):
    """How control's capacity controller starts, warms and drains replicas
    (``control/capacity/replicas.py``); the policy's own settings are in ``capacity.yaml``.

    ``drain_grace_s``: how long a replica marked draining keeps its models loaded before they are
    unloaded, so that every gateway has polled the replicas document (about once a second) and
    stopped placing on it; then in-flight requests finish (bounded by ``drain_timeout_s``).
    ``default_boot_s`` / ``default_load_s``: predicted process boot and model load+warm times
    until the first measured ones."""

    enabled: bool = True
    drain_grace_s: Annotated[float, Field(ge=0, le=60)] = 3.0
    drain_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    load_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 240.0
    default_boot_s: Annotated[float, Field(ge=0, le=3600)] = 3.0
    default_load_s: Annotated[float, Field(ge=0, le=3600)] = 5.0
    gateway_timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0
    error_budget: Annotated[float, Field(gt=0, lt=1)] = 0.01  # 1 - attainment objective, for burn rates


class KubernetesSettings(StrictModel):
    """Control's Kubernetes mode (``mode: kubernetes``): it starts no worker. It renders the model
    repository to ``repository_uri`` (``s3://bucket/prefix?endpoint=...``, which every Triton pod
    reads as its ``--model-repository``) and loads and unloads models through Triton's
    model-control API on every pod of a pool, found by resolving the pool's ``host`` in
    ``pools.yaml`` (its headless Service's DNS name) to one address per ready pod.
    ``gateway_host`` is the gateways' headless Service, resolved the same way before each wait
    for the gateways to apply new routing, on ``gateway_port``; the capacity controller reads the
    demand from those gateways' ``/metrics``, so it runs only when ``gateway_host`` is set.
    ``pod_start_timeout_s``: how long pods the controller asked for count as starting (set it to
    the pools' startup-probe budget, ``startup_timeout_s`` in ``fleet.yaml``)."""

    repository_uri: Annotated[str, Field(pattern=r"^s3://[^/?#]+")]
    gateway_host: str | None = None
    gateway_port: Annotated[int, Field(ge=1, le=65535)] = 8080
    pod_start_timeout_s: Annotated[float, Field(gt=0, le=7200)] = 1800.0


class ControlSettings(StrictModel):
    mode: Literal["local", "kubernetes"] = "local"
    kubernetes: KubernetesSettings | None = None
    registry_url: str = "sqlite:///registry.db"
    artifact_store: str = "store"
    verified_dir: Path = Path("verified")
    trusted_keys_dir: Path = Path("keys/trusted")
    local_signing_key: Path = Path("keys/local-build.key")
    rollout: RolloutSettings = RolloutSettings()
    canary: CanarySettings = CanarySettings()
    replicas: ReplicaSettings = ReplicaSettings()

    @model_validator(mode="after")
    def _kubernetes_block_with_its_mode(self) -> ControlSettings:
        if self.mode == "kubernetes" and self.kubernetes is None:
            raise ValueError("mode kubernetes needs a kubernetes: block (repository_uri: s3://...)")
        return self

    def resolved(self, state_dir: Path) -> ControlSettings:
        """Relative paths (and a relative SQLite file or local store) made absolute under ``state_dir``."""
        def under(path: Path) -> Path:
            return path if path.is_absolute() else state_dir / path
        registry_url = self.registry_url
        sqlite_prefix = "sqlite:///"
        if registry_url.startswith(sqlite_prefix) and not registry_url[len(sqlite_prefix):].startswith("/"):
            registry_url = sqlite_prefix + str(under(Path(registry_url[len(sqlite_prefix):])))
        store = self.artifact_store
        if "://" not in store:
            store = str(under(Path(store)))
        return self.model_copy(update={
            "registry_url": registry_url, "artifact_store": store, "verified_dir": under(self.verified_dir),
            "trusted_keys_dir": under(self.trusted_keys_dir), "local_signing_key": under(self.local_signing_key),
        })


def load_control_settings(path: Path, state_dir: Path) -> ControlSettings:
    """Settings from ``path`` (defaults if it does not exist), paths resolved under ``state_dir``."""
    raw = read_yaml(path) if path.exists() else None
    try:
        settings = ControlSettings.model_validate(raw or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return settings.resolved(state_dir.resolve())
