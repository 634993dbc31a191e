"""Builders of autoscaling configs and snapshots for the policy's unit tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from scheduling.autoscaling import (
    AutoscalingConfig,
    ModelPolicy,
    ModelSignals,
    PoolModel,
    PoolSignals,
    ScalingTarget,
    Snapshot,
)
from scheduling.capacity import CapacityProfile

A10 = CapacityProfile("a10", 24, 16_000, 4096, 6000, 450, 1.006)
A100 = CapacityProfile("a100", 80, 120_000, 32768, 16000, 2000, 3.67)
H100 = CapacityProfile("h100", 80, 120_000, 32768, 49000, 6800, 12.29)


def target(pool: str = "p", model: str = "m", profile: CapacityProfile = A100, min_replicas: int = 1,
           max_replicas: int = 20, region: str = "local") -> ScalingTarget:
    return ScalingTarget(PoolModel(pool, model), profile, region, min_replicas, max_replicas)


def config(targets: Sequence[ScalingTarget], *, scale_to_zero: bool = False, idle_s: float = 600.0,
           model_max_replicas: int | None = None, model_max_cost: float | None = None,
           tenant_caps: Mapping[str, float] | None = None, window_s: float = 300.0, **kw: float) -> AutoscalingConfig:
    models = {t.key.model for t in targets}
    policies = {m: ModelPolicy(m, queue_wait_p95_s=2.0, ttft_p95_s=4.0, scale_to_zero=scale_to_zero, idle_s=idle_s,
                               max_replicas=model_max_replicas, max_cost_per_hour=model_max_cost) for m in models}
    return AutoscalingConfig(MappingProxyType({t.key: t for t in targets}), MappingProxyType(policies),
                             MappingProxyType(dict(tenant_caps or {})), scale_down_window_s=window_s, **kw)  # type: ignore[arg-type]


def snapshot(model: ModelSignals, *pools: PoolSignals) -> Snapshot:
    return Snapshot(MappingProxyType({model.model: model}), MappingProxyType({p.key: p for p in pools}))


def load(tokens_per_s: float, model: str = "m", **kw: Any) -> ModelSignals:
    """Demand of ``tokens_per_s`` split 3:1 prompt:output."""
    return ModelSignals(model, arriving_prompt_tokens_per_s=0.75 * tokens_per_s,
                        arriving_output_tokens_per_s=0.25 * tokens_per_s, **kw)
