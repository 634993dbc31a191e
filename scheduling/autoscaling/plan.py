"""One model's recommendation for one tick, before the scale-down window: the sizing terms of
``sizing`` combined and allocated over the model's pools by ``allocation``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduling.autoscaling.allocation import Allocation, Limits, PoolOption, allocate
from scheduling.autoscaling.sizing import (
    Demand,
    burn_replicas,
    demand_of,
    kv_replicas,
    latency_ratio,
    latency_replicas,
    replica_tokens_per_s,
    up_limit,
)
from scheduling.autoscaling.types import (
    AutoscalingConfig,
    ModelPolicy,
    PoolModel,
    PoolSignals,
    Reason,
    ScalingTarget,
    Snapshot,
)

_EPS = 1e-9


@dataclass(frozen=True)
class ModelPlan:
    """Recommended replicas per (pool, model) of one model, the binding reason, the cap that held
    it back (``None``: none), the terms behind it, and whether it is an idle scale to zero."""

    model: str
    recommended: Mapping[PoolModel, int]
    reason: Reason
    capped: Reason | None
    numbers: Mapping[str, float]
    to_zero: bool = False

    def cost_per_hour(self, config: AutoscalingConfig) -> float:
        return sum(n * config.targets[k].cost_per_hour for k, n in self.recommended.items())


def plan_model(model: str, snapshot: Snapshot, config: AutoscalingConfig, demand_factor: float = 1.0) -> ModelPlan:
    """The recommendation for ``model``; ``demand_factor`` < 1 removes work of tenants over their
    cost cap (then a shortfall is reported as ``Reason.TENANT_CAP``)."""
    policy, signals = config.models[model], snapshot.model(model)
    targets = config.pools_of(model)
    pools = {t.key: snapshot.pool(t.key) for t in targets}
    current = sum(p.current for p in pools.values())
    if _idle_to_zero(policy, snapshot, targets, current):
        zero = MappingProxyType({t.key: t.min_replicas for t in targets})
        return ModelPlan(model, zero, Reason.IDLE, None, MappingProxyType({"idle_s": signals.idle_s}), to_zero=True)
    demand = demand_of(signals, policy).scaled(demand_factor)
    options = _residency_floor([_option(t, snapshot, config, demand) for t in targets], targets, snapshot)
    starting = sum(p.starting for p in pools.values())
    ratio, which = latency_ratio(signals, policy)
    limits = Limits(up_limit(current, config), policy.max_replicas, policy.max_cost_per_hour)
    token_only = allocate([replace(o, floor=0) for o in options], demand.tokens_per_s, 1, limits)
    token_replicas = sum(token_only.replicas.values())
    lat = latency_replicas(current, ratio, config) if starting == 0 else 0
    burn = burn_replicas(token_replicas, current, signals, config) if starting == 0 else 0
    required = max(1, math.ceil(max(lat, burn) * demand_factor - _EPS))
    numbers = {"demand_tokens_per_s": demand.tokens_per_s, "latency_ratio": ratio,
               "burn_rate_short": signals.burn_rate_short, "burn_rate_long": signals.burn_rate_long,
               "held_requests": float(signals.held_requests), "current": float(current),
               "token_work_replicas": float(token_replicas),
               "latency_replicas": float(lat), "burn_replicas": float(burn),
               "kv_replicas": float(sum(o.floor for o in options))}
    held = _hold(options, pools, demand.tokens_per_s, config, required, limits)
    chosen = held or allocate(options, demand.tokens_per_s, required, limits)
    numbers["coverage"] = min(chosen.coverage, 1e9)
    reason = _reason(numbers, which, current, signals.held_requests, held is not None)
    if reason is Reason.TOKEN_WORK and _minimums_bind(options, chosen, demand.tokens_per_s):
        reason = Reason.MIN_REPLICAS
    capped = chosen.capped
    if capped is None and demand_factor < 1.0 - _EPS:
        capped = Reason.TENANT_CAP
    return ModelPlan(model, MappingProxyType(dict(chosen.replicas)), capped or reason, capped,
                     MappingProxyType(numbers))


def _idle_to_zero(policy: ModelPolicy, snapshot: Snapshot, targets: tuple[ScalingTarget, ...], current: int) -> bool:
    """Scale-to-zero applies: allowed, no work, nothing in flight, idle long enough (or already 0)."""
    signals = snapshot.model(policy.model)
    if not policy.scale_to_zero or signals.has_work:
        return False
    if any(snapshot.pool(t.key).in_flight_tokens > 0 for t in targets):
        return False
    return current == 0 or signals.idle_s >= policy.idle_s


def _option(target: ScalingTarget, snapshot: Snapshot, config: AutoscalingConfig, demand: Demand) -> PoolOption:
    """``target`` as an allocation option, its floor the replicas its live KV use needs."""
    pool = snapshot.pool(target.key)
    floor = kv_replicas(pool, config)
    return PoolOption(target.key, replica_tokens_per_s(target, pool, demand), target.cost_per_hour,
                      target.min_replicas, target.max_replicas, min(floor, target.max_replicas))


def _residency_floor(options: list[PoolOption], targets: tuple[ScalingTarget, ...],
                     snapshot: Snapshot) -> list[PoolOption]:
    """When held requests may run only in ``held_regions`` and no pool there has a replica, a
    floor of one on the cheapest pool in those regions (its maximum allowing)."""
    signals = snapshot.model(targets[0].key.model) if targets else None
    if signals is None or not signals.held_requests or not signals.held_regions:
        return options
    regions = {t.key: t.region for t in targets}
    allowed = [o for o in options if regions[o.key] in signals.held_regions and o.max_replicas > 0]
    if not allowed or any(snapshot.pool(o.key).current > 0 for o in allowed):
        return options
    cheapest = min(allowed, key=lambda o: (o.cost_per_token, o.key.pool))
    return [replace(o, floor=max(o.floor, 1)) if o is cheapest else o for o in options]


def _hold(options: list[PoolOption], pools: Mapping[PoolModel, PoolSignals], demand_tokens_per_s: float,
          config: AutoscalingConfig, required: int, limits: Limits) -> Allocation | None:
    """The current counts when they cover the demand within ``tolerance`` (HPA's band) and meet
    every bound, floor, the model's caps and the required total; else None."""
    counts: dict[PoolModel, int] = {}
    for option in options:
        pool = pools[option.key]
        if not max(option.min_replicas, option.floor) <= pool.current <= option.max_replicas:
            return None
        counts[option.key] = pool.current
    total = sum(counts.values())
    if total < required or demand_tokens_per_s <= _EPS:
        return None
    if limits.model_replicas is not None and total > limits.model_replicas:
        return None
    cost = sum(counts[o.key] * o.cost_per_hour for o in options)
    if limits.model_cost_per_hour is not None and cost > limits.model_cost_per_hour + _EPS:
        return None
    capacity = sum(counts[o.key] * o.tokens_per_s for o in options)
    if capacity <= 0 or abs(demand_tokens_per_s / capacity - 1.0) > config.tolerance:
        return None
    coverage = capacity / demand_tokens_per_s
    return Allocation(MappingProxyType(counts), coverage, None)


def _minimums_bind(options: list[PoolOption], chosen: Allocation, demand_tokens_per_s: float) -> bool:
    """The warm minimums alone carry the demand and the allocation is just them."""
    minimums = sum(o.min_replicas for o in options)
    return (minimums > 0 and sum(chosen.replicas.values()) == minimums
            and sum(o.min_replicas * o.tokens_per_s for o in options) >= demand_tokens_per_s)


def _reason(numbers: Mapping[str, float], latency_which: str, current: int, held_requests: int, steady: bool) -> Reason:
    """The term that asked for the most replicas (token work on ties)."""
    if steady:
        return Reason.STEADY
    if current == 0 and held_requests > 0:
        return Reason.HELD_REQUESTS
    terms = [(numbers["token_work_replicas"], 3, Reason.TOKEN_WORK),
             (numbers["latency_replicas"], 2, Reason.QUEUE_WAIT if latency_which == "queue_wait" else Reason.TTFT),
             (numbers["burn_replicas"], 1, Reason.BURN_RATE), (numbers["kv_replicas"], 0, Reason.KV_PRESSURE)]
    return max(terms, key=lambda t: (t[0], t[1]))[2]
