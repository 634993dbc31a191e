"""The capacity policy on hand-made snapshots: sizing by token work, latency and burn raises,
scale-down window, scale to and from zero, caps and overrides, heterogeneous pools."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from scheduling.autoscaling import (
    Action,
    AutoscalingConfig,
    ControllerState,
    Override,
    PoolModel,
    PoolSignals,
    Reason,
    decide,
)
from scheduling.autoscaling.sizing import Demand, replica_tokens_per_s
from tests.unit.scheduling.autoscaling.helpers import A10, A100, H100, config, load, snapshot, target

KEY = PoolModel("p", "m")


def _one_replica_tokens() -> float:
    return replica_tokens_per_s(target(), PoolSignals(KEY), Demand(0.75, 0.25))


def test_desired_replicas_follow_token_work() -> None:
    cfg = config([target()])
    per_replica = _one_replica_tokens()
    (d,), _ = decide(snapshot(load(3.5 * per_replica), PoolSignals(KEY, ready=1)), cfg, ControllerState(), 0.0)
    assert d.desired == 4 and d.action is Action.UP and d.reason is Reason.TOKEN_WORK


def test_scale_up_is_limited_per_step_but_several_at_once() -> None:
    cfg = config([target(max_replicas=100)])
    (d,), _ = decide(snapshot(load(50 * _one_replica_tokens()), PoolSignals(KEY, ready=2)), cfg, ControllerState(), 0)
    assert d.desired == 6  # max(2 x 2, 2 + 4)


def test_never_below_min_and_hold_within_tolerance() -> None:
    cfg = config([target(min_replicas=2)])
    (d,), _ = decide(snapshot(load(0.0), PoolSignals(KEY, ready=2)), cfg, ControllerState(), 0.0)
    assert d.desired == 2 and d.action is Action.HOLD and d.reason is Reason.MIN_REPLICAS
    per = _one_replica_tokens()
    (d,), _ = decide(snapshot(load(3.05 * per), PoolSignals(KEY, ready=3)), config([target()]), ControllerState(), 0)
    assert d.desired == 3 and d.reason is Reason.STEADY


def test_scale_down_waits_for_the_window() -> None:
    cfg = config([target()], window_s=300.0)
    per = _one_replica_tokens()
    state = ControllerState()
    (d,), state = decide(snapshot(load(4 * per), PoolSignals(KEY, ready=4)), cfg, state, 0.0)
    assert d.desired == 4
    for t in range(15, 300, 15):
        (d,), state = decide(snapshot(load(per), PoolSignals(KEY, ready=4)), cfg, state, float(t))
        assert d.desired == 4 and d.reason is Reason.STABILISING
    (d,), state = decide(snapshot(load(per), PoolSignals(KEY, ready=4)), cfg, state, 300.0)
    assert d.desired == 1 and d.action is Action.DOWN


def test_latency_over_objective_raises_and_waits_for_starting_replicas() -> None:
    cfg = config([target()])
    slow = load(0.0, queue_wait_p95_s=6.0)  # 3x the 2 s objective
    (d,), _ = decide(snapshot(slow, PoolSignals(KEY, ready=2)), cfg, ControllerState(), 0.0)
    assert d.desired == 4 and d.reason is Reason.QUEUE_WAIT  # ratio capped at max_up_factor 2
    (d,), _ = decide(snapshot(slow, PoolSignals(KEY, ready=2, starting=2)), cfg, ControllerState(), 0.0)
    assert d.desired == 4 and d.action is Action.HOLD


def test_burn_rate_on_both_windows_adds_replicas() -> None:
    cfg = config([target()])
    (d,), _ = decide(snapshot(load(0.0, burn_rate_short=5.0, burn_rate_long=3.0), PoolSignals(KEY, ready=4)),
                     cfg, ControllerState(), 0.0)
    assert d.desired == 5 and d.reason is Reason.BURN_RATE
    (d,), _ = decide(snapshot(load(0.0, burn_rate_short=5.0, burn_rate_long=1.0), PoolSignals(KEY, ready=4)),
                     cfg, ControllerState(), 0.0)
    assert d.desired == 4


def test_kv_pressure_is_a_floor() -> None:
    cfg = config([target()])
    (d,), _ = decide(snapshot(load(0.0), PoolSignals(KEY, ready=2, kv_used_fraction=0.99)), cfg, ControllerState(), 0)
    assert d.desired == 3 and d.reason is Reason.KV_PRESSURE


def test_scale_to_zero_after_idle_and_back_when_requests_are_held() -> None:
    cfg = config([target(min_replicas=0)], scale_to_zero=True, idle_s=60.0)
    (d,), state = decide(snapshot(load(0.0, idle_s=30.0), PoolSignals(KEY, ready=1)), cfg, ControllerState(), 0.0)
    assert d.desired == 1
    (d,), state = decide(snapshot(load(0.0, idle_s=61.0), PoolSignals(KEY, ready=1)), cfg, state, 31.0)
    assert d.desired == 0 and d.action is Action.TO_ZERO and d.reason is Reason.IDLE
    (d,), state = decide(snapshot(load(0.0, idle_s=70.0), PoolSignals(KEY)), cfg, state, 46.0)
    assert d.desired == 0 and d.action is Action.HOLD
    held = load(0.0, held_requests=5)
    (d,), state = decide(snapshot(held, PoolSignals(KEY)), cfg, state, 61.0)
    assert d.desired == 1 and d.action is Action.FROM_ZERO and d.reason is Reason.HELD_REQUESTS


def test_without_scale_to_zero_a_model_keeps_one_replica() -> None:
    cfg = config([target(min_replicas=0)])
    (d,), _ = decide(snapshot(load(0.0, idle_s=1e6), PoolSignals(KEY, ready=1)), cfg, ControllerState(), 0.0)
    assert d.desired == 1


def test_max_replicas_caps_and_says_so_until_an_override() -> None:
    cfg = config([target(max_replicas=1)])
    heavy = snapshot(load(10 * _one_replica_tokens()), PoolSignals(KEY, ready=1))
    (d,), state = decide(heavy, cfg, ControllerState(), 0.0)
    assert d.desired == 1 and d.capped_by_budget and d.reason is Reason.MAX_REPLICAS
    state = state.with_override(Override(KEY, 3, expires_at_s=100.0, reason="incident", actor="alice"))
    (d,), state = decide(heavy, cfg, state, 50.0)
    assert d.desired == 3 and d.reason is Reason.OVERRIDE and not d.capped_by_budget
    (d,), state = decide(heavy, cfg, state, 100.0)
    assert d.desired == 1 and d.capped_by_budget and not state.overrides


def test_model_cost_cap_bounds_spend() -> None:
    cfg = config([target(max_replicas=50)], model_max_cost=3 * A100.cost_per_hour + 0.01)
    (d,), _ = decide(snapshot(load(40 * _one_replica_tokens()), PoolSignals(KEY, ready=3)), cfg, ControllerState(), 0)
    assert d.desired == 3 and d.capped_by_budget and d.reason is Reason.MODEL_CAP


def test_tenant_cost_cap_takes_its_work_out_of_the_demand() -> None:
    per = _one_replica_tokens()
    signals = load(8 * per, tenant_token_share={"big": 0.5, "small": 0.5})
    uncapped, _ = decide(snapshot(signals, PoolSignals(KEY, ready=8)), config([target()]), ControllerState(), 0.0)
    cfg = config([target()], tenant_caps={"big": A100.cost_per_hour}, window_s=0.0)
    capped, _ = decide(snapshot(signals, PoolSignals(KEY, ready=8)), cfg, ControllerState(), 0.0)
    assert capped[0].recommended < uncapped[0].recommended and capped[0].reason is Reason.TENANT_CAP


def test_tenant_replica_cap_bounds_its_share_of_replicas() -> None:
    signals = load(10 * _one_replica_tokens(), tenant_token_share={"big": 0.8, "small": 0.2})
    base = config([target()], window_s=0.0)
    cfg = AutoscalingConfig(base.targets, base.models, tenant_max_replicas=MappingProxyType({"big": 2.0}),
                            scale_down_window_s=0.0)
    (d,), _ = decide(snapshot(signals, PoolSignals(KEY, ready=10)), cfg, ControllerState(), 0.0)
    assert 0.8 * d.desired <= 2.0 + 0.8 and d.reason is Reason.TENANT_CAP and d.capped_by_budget


def test_heterogeneous_pools_add_cheapest_per_token_first_and_remove_expensive_first() -> None:
    # at a 3:1 prompt:output mix an H100 token costs less than an A10 token (8.5e-4 vs 9.1e-4 $/1k)
    targets = [target("a10s", profile=A10, min_replicas=0, max_replicas=20),
               target("h100s", profile=H100, min_replicas=0, max_replicas=2)]
    cfg = config(targets, window_s=0.0)
    per = {t.key.pool: replica_tokens_per_s(t, PoolSignals(t.key), Demand(0.75, 0.25)) for t in targets}
    assert H100.cost_per_hour / per["h100s"] < A10.cost_per_hour / per["a10s"]
    ready = [PoolSignals(t.key, ready=2) for t in targets]
    ds, _ = decide(snapshot(load(2 * per["h100s"] + 5 * per["a10s"]), *ready), cfg, ControllerState(), 0.0)
    assert {d.key.pool: d.desired for d in ds} == {"h100s": 2, "a10s": 5}
    ds, _ = decide(snapshot(load(0.5 * per["a10s"]), *ready), cfg, ControllerState(), 0.0)
    assert {d.key.pool: d.desired for d in ds} == {"h100s": 1, "a10s": 0}


def test_held_requests_bound_to_a_region_start_a_replica_there() -> None:
    targets = [target("us", profile=A10, min_replicas=0, region="us"),
               target("eu", profile=H100, min_replicas=0, region="eu")]
    cfg = config(targets, scale_to_zero=True)
    held = load(0.0, held_requests=2, held_regions=frozenset({"eu"}))
    ds, _ = decide(snapshot(held, PoolSignals(targets[0].key), PoolSignals(targets[1].key)), cfg, ControllerState(), 0)
    assert {d.key.pool: d.desired for d in ds}["eu"] == 1


@pytest.mark.parametrize(("low", "high"), [(3, 2), (-1, 2)])
def test_bad_targets_are_refused(low: int, high: int) -> None:
    with pytest.raises(ValueError, match="min_replicas"):
        target(min_replicas=low, max_replicas=high)
