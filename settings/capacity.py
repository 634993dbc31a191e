"""``capacity.yaml``: the capacity controller's configuration, read once into the pure policy's
types (``scheduling.autoscaling``) and checked against the stack and the scheduling settings.

Shape (every field optional but ``models.<m>.pools``)::

    controller: {period_s: 15, scale_down_window_s: 300, tolerance: 0.1, max_up_factor: 2.0,
                 max_up_replicas: 4, kv_target_use: 0.85,
                 burn_rate: {short_window_s: 300, long_window_s: 3600, threshold: 2.0, step: 0.25}}
    models:
      chat:
        objective_tier: premium        # objectives default from this tier's SLO:
        ttft_p95_s: null               #   its ttft_s
        queue_wait_p95_s: null         #   half its ttft_s
        target_utilisation: 0.75       # a replica is sized to run at this share of its profile's speed
        backlog_drain_s: 60            # the queued backlog is sized to drain within this, on top of arrivals
        scale_to_zero: {enabled: false, idle_s: 600}
        cost_cap: {max_replicas: null, max_cost_per_hour: null}   # over all the model's pools
        pools:
          local-cpu: {min_replicas: 1, max_replicas: 2}
    tenants:
      acme: {max_cost_per_hour: 5.0}   # the tenant's token share of every model's $/h (or max_replicas:
                                       # its token share of every model's replicas)

Only the (pool, model) pairs listed are controlled; the others keep the count ``shunter up``
starts. ``pools.<p>.workers`` stays the number of workers started at ``shunter up`` (the initial
count): it must hold every listed model's ``min_replicas`` on that pool, and the pool reserves the
ports of ``max(workers, max_replicas of its models)`` workers (``CapacitySettings.slots``), which
must not overlap another pool's. A missing file means no controlled pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated

from pydantic import Field, ValidationError, model_validator

from scheduling.autoscaling import AutoscalingConfig, ModelPolicy, PoolModel, ScalingTarget
from scheduling.tenants import Tier
from settings.base import ConfigError, StrictModel, read_yaml
from settings.scheduling import SchedulingSettings
from settings.stack import StackConfig

Seconds = Annotated[float, Field(ge=0)]
PositiveSeconds = Annotated[float, Field(gt=0)]
Replicas = Annotated[int, Field(ge=0, le=1024)]


class _BurnRate(StrictModel):
    short_window_s: PositiveSeconds = 300.0
    long_window_s: PositiveSeconds = 3600.0
    threshold: Annotated[float, Field(gt=0)] = 2.0
    step: Annotated[float, Field(gt=0, le=4)] = 0.25

    @model_validator(mode="after")
    def _short_below_long(self) -> _BurnRate:
        if self.short_window_s >= self.long_window_s:
            raise ValueError("short_window_s must be < long_window_s")
        return self


class _Controller(StrictModel):
    period_s: PositiveSeconds = 15.0
    scale_down_window_s: Seconds = 300.0
    tolerance: Annotated[float, Field(ge=0, lt=1)] = 0.1
    max_up_factor: Annotated[float, Field(ge=1, le=100)] = 2.0
    max_up_replicas: Annotated[int, Field(ge=1, le=1024)] = 4
    kv_target_use: Annotated[float, Field(gt=0, le=1)] = 0.85
    burn_rate: _BurnRate = _BurnRate()


class _PoolBounds(StrictModel):
    min_replicas: Replicas = 1
    max_replicas: Replicas = 1

    @model_validator(mode="after")
    def _min_le_max(self) -> _PoolBounds:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} > max_replicas {self.max_replicas}")
        return self


class _ScaleToZero(StrictModel):
    enabled: bool = False
    idle_s: Seconds = 600.0


class _CostCap(StrictModel):
    max_replicas: Replicas | None = None
    max_cost_per_hour: Annotated[float, Field(ge=0)] | None = None


class _ModelEntry(StrictModel):
    objective_tier: Tier = Tier.PREMIUM
    ttft_p95_s: PositiveSeconds | None = None
    queue_wait_p95_s: PositiveSeconds | None = None
    target_utilisation: Annotated[float, Field(gt=0, le=1)] = 0.75
    backlog_drain_s: PositiveSeconds = 60.0
    scale_to_zero: _ScaleToZero = _ScaleToZero()
    cost_cap: _CostCap = _CostCap()
    pools: dict[str, _PoolBounds] = Field(min_length=1)

    @model_validator(mode="after")
    def _zero_means_no_warm_minimum(self) -> _ModelEntry:
        if self.scale_to_zero.enabled:
            for pool, bounds in self.pools.items():
                if bounds.min_replicas > 0:
                    raise ValueError(f"pools.{pool}.min_replicas is {bounds.min_replicas}: a model that scales "
                                     "to zero has no warm minimum (set it to 0 or disable scale_to_zero)")
        return self


class _TenantCap(StrictModel):
    max_cost_per_hour: Annotated[float, Field(ge=0)] | None = None
    max_replicas: Annotated[float, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _some_cap(self) -> _TenantCap:
        if self.max_cost_per_hour is None and self.max_replicas is None:
            raise ValueError("set max_cost_per_hour or max_replicas")
        return self


class CapacityFile(StrictModel):
    controller: _Controller = _Controller()
    models: dict[str, _ModelEntry] = Field(default_factory=dict)
    tenants: dict[str, _TenantCap] = Field(default_factory=dict)


@dataclass(frozen=True)
class CapacitySettings:
    """The policy's configuration and each pool's worker slots (ports reserved for its workers)."""

    policy: AutoscalingConfig
    slots: Mapping[str, int]

    def targets_of_pool(self, pool: str) -> tuple[ScalingTarget, ...]:
        return tuple(t for k, t in sorted(self.policy.targets.items(), key=lambda kv: kv[0].model) if k.pool == pool)


def load_capacity(path: Path, stack: StackConfig, scheduling: SchedulingSettings,
                  tenants: Iterable[str] | None = None) -> CapacitySettings:
    """Read and validate ``capacity.yaml`` against the stack (models and pools exist, the pool
    serves the model, workers hold the minimums, reserved ports do not overlap) and the tenants
    (when given); ConfigError naming the file and the field. A missing file: nothing controlled."""
    parsed = _parse(path) if path.exists() else CapacityFile()
    try:
        _check_references(parsed, stack, set(tenants) if tenants is not None else None)
        slots = _slots(parsed, stack)
        return CapacitySettings(_policy(parsed, stack, scheduling), MappingProxyType(slots))
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _parse(path: Path) -> CapacityFile:
    try:
        return CapacityFile.model_validate(read_yaml(path) or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _check_references(parsed: CapacityFile, stack: StackConfig, tenants: set[str] | None) -> None:
    pools = {p.name: p for p in stack.pools}
    for model, entry in parsed.models.items():
        if stack.model(model) is None:
            raise ValueError(f"models.{model}: unknown model (models.yaml has {sorted(m.name for m in stack.models)})")
        for pool in entry.pools:
            if pool not in pools:
                raise ValueError(f"models.{model}.pools.{pool}: unknown pool (pools.yaml has {sorted(pools)})")
            if model not in pools[pool].models:
                raise ValueError(f"models.{model}.pools.{pool}: pool {pool} does not serve {model}")
    if tenants is not None:
        for tenant in parsed.tenants:
            if tenant not in tenants:
                raise ValueError(f"tenants.{tenant}: unknown tenant (tenants.yaml has {sorted(tenants)})")


def _slots(parsed: CapacityFile, stack: StackConfig) -> dict[str, int]:
    """Worker slots per pool; raises when ``workers`` is below a minimum or ports overlap. A pool of
    pods (``discovery: dns``, Kubernetes) reserves no ports: every pod listens on the same ones, and
    its slots are the most pods its ScaledObject allows (the largest ``max_replicas``)."""
    slots: dict[str, int] = {}
    for pool in stack.pools:
        bounds = {m: e.pools[pool.name] for m, e in parsed.models.items() if pool.name in e.pools}
        if pool.discovery == "dns":
            slots[pool.name] = max([0, *(b.max_replicas for b in bounds.values())])
            continue
        for model, b in bounds.items():
            if b.min_replicas > pool.workers:
                raise ValueError(f"models.{model}.pools.{pool.name}.min_replicas {b.min_replicas} > "
                                 f"pools.yaml {pool.name}.workers {pool.workers} (the workers started at up)")
        slots[pool.name] = max([pool.workers, *(b.max_replicas for b in bounds.values())])
    used: dict[int, str] = {}
    for pool in stack.pools:
        if pool.discovery == "dns":
            continue
        for index in range(slots[pool.name]):
            for port in pool.worker_ports(index):
                if port in used:
                    raise ValueError(f"pool {pool.name}: worker {index} (of max_replicas) needs port {port}, "
                                     f"already reserved by pool {used[port]}")
                used[port] = pool.name
    return slots


def _policy(parsed: CapacityFile, stack: StackConfig, scheduling: SchedulingSettings) -> AutoscalingConfig:
    pools = {p.name: p for p in stack.pools}
    targets: dict[PoolModel, ScalingTarget] = {}
    models: dict[str, ModelPolicy] = {}
    for model, entry in parsed.models.items():
        slo = scheduling.slo[entry.objective_tier]
        models[model] = ModelPolicy(model, entry.queue_wait_p95_s or slo.ttft_s / 2.0, entry.ttft_p95_s or slo.ttft_s,
                                    entry.scale_to_zero.enabled, entry.scale_to_zero.idle_s,
                                    entry.cost_cap.max_replicas, entry.cost_cap.max_cost_per_hour,
                                    entry.backlog_drain_s)
        for name, bounds in entry.pools.items():
            key = PoolModel(name, model)
            targets[key] = ScalingTarget(key, scheduling.profile_of(pools[name].profile_name), pools[name].region,
                                         bounds.min_replicas, bounds.max_replicas, entry.target_utilisation)
    c = parsed.controller
    return AutoscalingConfig(
        MappingProxyType(targets), MappingProxyType(models),
        MappingProxyType({t: cap.max_cost_per_hour for t, cap in parsed.tenants.items()
                          if cap.max_cost_per_hour is not None}),
        tenant_max_replicas=MappingProxyType({t: cap.max_replicas for t, cap in parsed.tenants.items()
                                              if cap.max_replicas is not None}),
        period_s=c.period_s, scale_down_window_s=c.scale_down_window_s, tolerance=c.tolerance,
        max_up_factor=c.max_up_factor, max_up_replicas=c.max_up_replicas,
        burn_short_window_s=c.burn_rate.short_window_s, burn_long_window_s=c.burn_rate.long_window_s,
        burn_rate_threshold=c.burn_rate.threshold, burn_step=c.burn_rate.step, kv_target_use=c.kv_target_use)
