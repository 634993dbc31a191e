"""The capacity policy: ``decide(snapshot, config, state, now_s) -> (decisions, new_state)``.

Pure (Ray Serve's ``autoscaling_policy`` shape): the control service's loop and the simulator
call it every ``config.period_s`` with what they measured; it never reads a clock. Per model it
plans replicas per pool (``plan.plan_model``), takes work of tenants over their $/h cap out of
the demand, then per (pool, model) applies the scale-down window (a lower count only once every
recommendation in ``scale_down_window_s`` asked for it; scale-to-zero waits ``idle_s`` instead)
and live overrides (a floor above every cap until it expires).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from scheduling.autoscaling.plan import ModelPlan, plan_model
from scheduling.autoscaling.types import (
    Action,
    AutoscalingConfig,
    ControllerState,
    Override,
    PoolModel,
    Reason,
    ScaleDecision,
    Snapshot,
)

_EPS = 1e-9
_TENANT_ROUNDS = 6


def decide(snapshot: Snapshot, config: AutoscalingConfig, state: ControllerState,
           now_s: float) -> tuple[tuple[ScaleDecision, ...], ControllerState]:
    """One tick: a decision per configured (pool, model), in key order, and the state to pass
    to the next tick (recommendations within the window, these decisions, live overrides)."""
    overrides = {k: o for k, o in state.overrides.items() if o.live(now_s)}
    plans = _plans(snapshot, config)
    history: dict[PoolModel, tuple[tuple[float, int], ...]] = {}
    decisions: list[ScaleDecision] = []
    for plan in plans.values():
        current_total = sum(snapshot.pool(k).current for k in plan.recommended)
        for key in sorted(plan.recommended, key=lambda k: k.pool):
            top = config.targets[key].max_replicas
            seed = ((now_s, min(snapshot.pool(key).current, top)),)  # a fresh controller: no scale-down at once
            recent = _recent(state.history.get(key, seed), now_s, config.scale_down_window_s)
            history[key] = (*recent, (now_s, plan.recommended[key]))
            decisions.append(_decide_key(key, plan, history[key], snapshot.pool(key).current, current_total,
                                         overrides.get(key), now_s, top))
    decisions.sort(key=lambda d: (d.key.model, d.key.pool))
    last = MappingProxyType({d.key: d for d in decisions})
    return tuple(decisions), ControllerState(MappingProxyType(history), last, MappingProxyType(overrides))


def _plans(snapshot: Snapshot, config: AutoscalingConfig) -> dict[str, ModelPlan]:
    """Every model's plan; models whose demand comes partly from tenants over their $/h cap are
    planned again with that work taken out (a few rounds: rounding to whole replicas and a pool's
    price per replica make one proportional cut fall short)."""
    models = sorted({k.model for k in config.targets})
    plans = {m: plan_model(m, snapshot, config) for m in models}
    kept: dict[str, float] = {}
    for _ in range(_TENANT_ROUNDS):
        over = _tenant_overspend(plans, snapshot, config)
        if not over:
            break
        for tenant, ratio in over.items():
            kept[tenant] = kept.get(tenant, 1.0) * ratio
        for model in models:
            shares = snapshot.model(model).tenant_token_share
            factor = 1.0 - sum(share * (1.0 - kept.get(t, 1.0)) for t, share in shares.items())
            if factor < 1.0 - _EPS:
                plans[model] = plan_model(model, snapshot, config, max(0.0, factor))
    return plans


def _tenant_overspend(plans: Mapping[str, ModelPlan], snapshot: Snapshot,
                      config: AutoscalingConfig) -> dict[str, float]:
    """Tenants over a cap, each with ``cap / spend`` (the tighter of $/h and replicas); a
    tenant's spend is its token share of every model's planned $/h and replicas."""
    caps = (config.tenant_max_cost_per_hour, config.tenant_max_replicas)
    spend: dict[str, list[float]] = {}
    for model, plan in plans.items():
        cost, replicas = plan.cost_per_hour(config), float(sum(plan.recommended.values()))
        for tenant, share in snapshot.model(model).tenant_token_share.items():
            if tenant in caps[0] or tenant in caps[1]:
                total = spend.setdefault(tenant, [0.0, 0.0])
                total[0] += share * cost
                total[1] += share * replicas
    over: dict[str, float] = {}
    for tenant, totals in spend.items():
        ratios = [cap[tenant] / s for cap, s in zip(caps, totals, strict=True)
                  if tenant in cap and s > cap[tenant] + _EPS]
        if ratios:
            over[tenant] = min(ratios)
    return over


def _recent(history: tuple[tuple[float, int], ...], now_s: float, window_s: float) -> tuple[tuple[float, int], ...]:
    return tuple((t, n) for t, n in history if now_s - t < window_s)


def _decide_key(key: PoolModel, plan: ModelPlan, history: tuple[tuple[float, int], ...], current: int,
                current_total: int, override: Override | None, now_s: float, max_replicas: int) -> ScaleDecision:
    """Window, override and action for one (pool, model); never above ``max_replicas`` but by
    an override."""
    recommended = plan.recommended[key]
    reason = plan.reason
    if plan.to_zero or recommended >= current:
        desired = recommended
    else:
        desired = min(current, max(n for _, n in history), max_replicas)
        if desired > recommended:
            reason = Reason.STABILISING
    if override is not None and override.replicas > desired:
        desired, reason = override.replicas, Reason.OVERRIDE
    numbers = MappingProxyType({**plan.numbers, "recommended": float(recommended)})
    capped = plan.capped is not None and reason is not Reason.OVERRIDE
    return ScaleDecision(key, current, desired, recommended, _action(current, desired, current_total, plan),
                         reason, numbers, capped, now_s)


def _action(current: int, desired: int, current_total: int, plan: ModelPlan) -> Action:
    if desired > current:
        return Action.FROM_ZERO if current_total == 0 else Action.UP
    if desired < current:
        return Action.TO_ZERO if plan.to_zero else Action.DOWN
    return Action.HOLD
