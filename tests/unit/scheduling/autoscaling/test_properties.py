"""Properties of the capacity policy over generated signals (hypothesis): bounds, monotonicity
in demand, the scale-down window, no flapping under constant noisy load, override expiry."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.autoscaling import (
    AutoscalingConfig,
    ControllerState,
    ModelSignals,
    Override,
    PoolModel,
    PoolSignals,
    ScaleDecision,
    decide,
)
from scheduling.autoscaling.sizing import Demand, replica_tokens_per_s
from tests.unit.scheduling.autoscaling.helpers import A10, A100, H100, config, load, snapshot, target

KEY = PoolModel("p", "m")
PER_REPLICA = replica_tokens_per_s(target(), PoolSignals(KEY), Demand(0.75, 0.25))
PERIOD_S = 15.0

signals = st.builds(
    ModelSignals, st.just("m"),
    arriving_prompt_tokens_per_s=st.floats(0, 40 * PER_REPLICA), arriving_output_tokens_per_s=st.floats(0, 20_000),
    pending_prompt_tokens=st.floats(0, 1e6), pending_output_tokens=st.floats(0, 1e5),
    queue_wait_p95_s=st.none() | st.floats(0, 60), ttft_p95_s=st.none() | st.floats(0, 60),
    burn_rate_short=st.floats(0, 20), burn_rate_long=st.floats(0, 20), held_requests=st.integers(0, 5),
    idle_s=st.floats(0, 2000))
replicas = st.builds(PoolSignals, st.just(KEY), ready=st.integers(0, 30), starting=st.integers(0, 5),
                     kv_used_fraction=st.floats(0, 1))


def _run(cfg: AutoscalingConfig, ticks: list[tuple[ModelSignals, PoolSignals]]) -> list[ScaleDecision]:
    """Tick the policy every PERIOD_S; the pool follows each decision at once (ready = desired)."""
    state = ControllerState()
    out: list[ScaleDecision] = []
    ready = ticks[0][1].ready
    for i, (model, pool) in enumerate(ticks):
        (d,), state = decide(snapshot(model, replace(pool, ready=ready, starting=0)), cfg, state, i * PERIOD_S)
        out.append(d)
        ready = d.desired
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(signals, replicas), min_size=1, max_size=30), st.integers(0, 5), st.integers(0, 25),
       st.booleans())
def test_never_below_min_nor_above_max_without_override(ticks: list[tuple[ModelSignals, PoolSignals]],
                                                        low: int, span: int, to_zero: bool) -> None:
    low = 0 if to_zero else low
    cfg = config([target(min_replicas=low, max_replicas=low + span)], scale_to_zero=to_zero, idle_s=300.0)
    for d in _run(cfg, ticks):
        assert low <= d.desired <= low + span
        assert d.capped_by_budget or d.desired <= max(d.recommended, d.current)


@settings(max_examples=150, deadline=None)
@given(signals, replicas, st.floats(1.0, 10.0))
def test_desired_replicas_are_monotone_in_demand(model: ModelSignals, pool: PoolSignals, factor: float) -> None:
    cfg = config([target(min_replicas=1, max_replicas=200)])
    more = replace(model, arriving_prompt_tokens_per_s=model.arriving_prompt_tokens_per_s * factor,
                   arriving_output_tokens_per_s=model.arriving_output_tokens_per_s * factor,
                   pending_prompt_tokens=model.pending_prompt_tokens * factor,
                   pending_output_tokens=model.pending_output_tokens * factor)
    (low,), _ = decide(snapshot(model, pool), cfg, ControllerState(), 0.0)
    (high,), _ = decide(snapshot(more, pool), cfg, ControllerState(), 0.0)
    assert high.desired >= low.desired


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 30), min_size=2, max_size=60), st.sampled_from([60.0, 300.0]))
def test_scale_down_is_never_faster_than_its_window(loads: list[float], window_s: float) -> None:
    cfg = config([target(min_replicas=1, max_replicas=100)], window_s=window_s)
    ticks = [(load(x * PER_REPLICA), PoolSignals(KEY, ready=1)) for x in loads]
    decisions = _run(cfg, ticks)
    for i, d in enumerate(decisions):
        if d.desired < d.current:
            recent = [e.recommended for e in decisions[: i + 1] if d.at_s - e.at_s < window_s]
            assert d.desired >= max(recent)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 25.0), st.floats(0.0, 0.2), st.integers(0, 2**32 - 1))
def test_constant_noisy_load_does_not_flap(base: float, noise: float, seed: int) -> None:
    rng = random.Random(seed)
    cfg = config([target(min_replicas=1, max_replicas=100)])
    ticks = [(load(base * PER_REPLICA * (1 + rng.uniform(-noise, noise)),
                   queue_wait_p95_s=rng.uniform(0.0, 1.5)), PoolSignals(KEY, ready=1)) for _ in range(240)]
    moves = [d.desired - d.current for d in _run(cfg, ticks) if d.desired != d.current]
    climb = next((i for i, move in enumerate(moves) if move < 0), len(moves))  # reaching the load: step limits
    settled = moves[climb:]  # from 1 replica to ~25 takes several steps (max_up_factor, max_up_replicas)
    reversals = sum(1 for a, b in itertools.pairwise(settled) if (a > 0) != (b > 0))
    assert reversals <= 1 and len(settled) <= 2


def test_override_lifts_above_the_cap_and_expires_on_time() -> None:
    cfg = config([target(max_replicas=2)])
    state = ControllerState().with_override(Override(KEY, 5, expires_at_s=60.0, reason="purchased", actor="bob"))
    heavy = load(50 * PER_REPLICA)
    desired = []
    ready = 2
    for t in range(0, 120, 15):
        (d,), state = decide(snapshot(heavy, PoolSignals(KEY, ready=ready)), cfg, state, float(t))
        desired.append((t, d.desired))
        ready = d.desired
    assert all(n == 5 for t, n in desired if t < 60) and all(n == 2 for t, n in desired if t >= 60)
    assert not state.overrides


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 200_000), st.floats(0.1, 50.0), st.floats(0.1, 50.0))
def test_cost_caps_bound_the_spend(demand: float, model_cap: float, tenant_cap: float) -> None:
    targets = [target("a", profile=A10, min_replicas=0, max_replicas=100),
               target("b", profile=A100, min_replicas=0, max_replicas=100),
               target("c", profile=H100, min_replicas=0, max_replicas=100)]
    cfg = config(targets, model_max_cost=model_cap, window_s=0.0)
    pools = [PoolSignals(t.key, ready=1) for t in targets]
    decisions, _ = decide(snapshot(load(demand), *pools), cfg, ControllerState(), 0.0)
    spend = sum(d.desired * cfg.targets[d.key].cost_per_hour for d in decisions)
    cheapest = min(t.cost_per_hour for t in targets)
    assert spend <= max(model_cap, cheapest) + 1e-9  # one replica is kept, on the cheapest pool that fits
    cfg = config(targets, tenant_caps={"t": tenant_cap}, window_s=0.0)
    only = load(demand, tenant_token_share={"t": 1.0})
    decisions, _ = decide(snapshot(only, *pools), cfg, ControllerState(), 0.0)
    spend = sum(d.desired * cfg.targets[d.key].cost_per_hour for d in decisions)
    assert spend <= tenant_cap + max(t.cost_per_hour for t in targets) + 1e-9
