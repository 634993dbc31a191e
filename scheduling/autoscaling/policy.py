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
            seed = ((now_s, snapshot.pool(key).current),)  # a fresh controller does not scale down at once
            recent = _recent(state.history.get(key, seed), now_s, config.scale_down_window_s)
            history[key] = (*recent, (now_s, plan.recommended[key]))
            decisions.append(_decide_key(key, plan, history[key], snapshot.pool(key).current, current_total,
                                         overrides.get(key), now_s))
    decisions.sort(key=lambda d: (d.key.model, d.key.pool))
    last = MappingProxyType({d.key: d for d in decisions})
    return tuple(decisions), ControllerState(MappingProxyType(history), last, MappingProxyType(overrides))


def _plans(snapshot: Snapshot, config: AutoscalingConfig) -> dict[str, ModelPlan]:
    """Every model's plan; models whose demand comes partly from tenants over their $/h cap are
    planned again with that work taken out."""
    models = sorted({k.model for k in config.targets})
    plans = {m: plan_model(m, snapshot, config) for m in models}
    factors = _tenant_demand_factors(plans, snapshot, config)
    for model, factor in factors.items():
        if factor < 1.0 - _EPS:
            plans[model] = plan_model(model, snapshot, config, factor)
    return plans


def _tenant_demand_factors(plans: Mapping[str, ModelPlan], snapshot: Snapshot,
                           config: AutoscalingConfig) -> dict[str, float]:
    """Per model, the share of its demand kept: a tenant's spend is its token share of each
    model's planned $/h; one over its cap keeps ``cap / spend`` of its work everywhere."""
    caps = config.tenant_max_cost_per_hour
    if not caps:
        return {}
    spend: dict[str, float] = {}
    for model, plan in plans.items():
        cost = plan.cost_per_hour(config)
        for tenant, share in snapshot.model(model).tenant_token_share.items():
            spend[tenant] = spend.get(tenant, 0.0) + share * cost
    kept = {t: min(1.0, caps[t] / s) if s > _EPS else 1.0 for t, s in spend.items() if t in caps}
    return {model: 1.0 - sum(share * (1.0 - kept.get(t, 1.0))
                             for t, share in snapshot.model(model).tenant_token_share.items())
            for model in plans}


def _recent(history: tuple[tuple[float, int], ...], now_s: float, window_s: float) -> tuple[tuple[float, int], ...]:
    return tuple((t, n) for t, n in history if now_s - t < window_s)


def _decide_key(key: PoolModel, plan: ModelPlan, history: tuple[tuple[float, int], ...], current: int,
                current_total: int, override: Override | None, now_s: float) -> ScaleDecision:
    """Window, override and action for one (pool, model)."""
    recommended = plan.recommended[key]
    reason = plan.reason
    if plan.to_zero or recommended >= current:
        desired = recommended
    else:
        desired = min(current, max(n for _, n in history))
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
