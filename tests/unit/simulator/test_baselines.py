"""Each baseline behaves as its definition says."""

from __future__ import annotations

from scheduling.tenants import Tenant, Tier
from simulator.records import SimRequest
from simulator.runner import RunSpec, simulate
from tests.unit.simulator.helpers import one

GOLD, SILVER, IRON = Tenant("gold", Tier.PREMIUM, 4.0), Tenant("silver", Tier.STANDARD), Tenant("iron", Tier.BATCH)


def _burst(count: int, tenants: list[Tenant], prompt: int = 2000, output: int = 200) -> list[SimRequest]:
    """``count`` requests arriving 1 ms apart, tenants in rotation."""
    return [one(f"r{i:04d}", tenants[i % len(tenants)], i * 0.001, prompt, output) for i in range(count)]


def _dispatch_order(policy: str, work: list[SimRequest], pool: dict[str, int]) -> list[str]:
    result, _ = simulate(RunSpec(policy, pool), work)
    dispatched = [r for r in result.records if r.dispatch_s is not None]
    return [r.request_id for r in sorted(dispatched, key=lambda r: (r.dispatch_s, r.request_id))]


def test_fcfs_dispatches_in_arrival_order_and_never_expires_or_rejects() -> None:
    work = _burst(400, [IRON, GOLD, SILVER])  # one A10 cannot keep up: a long queue
    result, summary = simulate(RunSpec("fcfs", {"a10": 1}), work)
    order = [r.request_id for r in sorted(result.records, key=lambda r: (r.dispatch_s or 0, r.request_id))]
    assert order == sorted(order)
    assert summary.overall.completed == 400


def test_priority_only_serves_premium_first_and_ignores_tenant_fairness() -> None:
    hog, small = Tenant("hog", Tier.STANDARD), Tenant("small", Tier.STANDARD)
    work = [*_burst(60, [hog]), one("z-gold", GOLD, 0.5, 2000, 200), one("z-small", small, 0.5, 2000, 200)]
    order = _dispatch_order("priority-only", work, {"a10": 1})
    queued_gold, queued_small = order.index("z-gold"), order.index("z-small")
    assert queued_gold < queued_small
    assert all(rid < "z" for rid in order[queued_gold + 1: queued_small])  # the hog's earlier ones first


def test_shunter_serves_a_returning_light_tenant_before_the_backlogged_hog() -> None:
    hog, small = Tenant("hog", Tier.PREMIUM), Tenant("small", Tier.PREMIUM)  # premium: never shed
    work = [*_burst(90, [hog], prompt=500, output=50), one("z-small", small, 0.5, 500, 50)]
    result, _ = simulate(RunSpec("shunter", {"a10": 1}), work)
    dispatched = {r.request_id: r.dispatch_s for r in result.records if r.dispatch_s is not None}
    small_at = dispatched["z-small"]
    overtaking = [rid for rid, at in dispatched.items() if rid < "z" and 0.5 <= at < small_at]
    assert len(overtaking) <= 1  # the hog's backlog does not hold the light tenant back
    fifo = _dispatch_order("priority-only", work, {"a10": 1})
    assert fifo.index("z-small") > 10  # without fairness it waits behind the hog's backlog


def test_round_robin_spreads_requests_over_workers_in_rotation() -> None:
    work = [one(f"r{i:03d}", SILVER, i * 5.0, 100, 5) for i in range(6)]  # spaced out: always idle
    result, _ = simulate(RunSpec("round-robin", {"a100-80": 3}), work)
    workers = [r.worker_id for r in sorted(result.records, key=lambda r: r.request_id)]
    assert workers == ["a100-80-00", "a100-80-01", "a100-80-02"] * 2


def test_triton_queue_rejects_past_its_queue_bound_and_times_out_lazily_in_the_worker() -> None:
    work = _burst(600, [SILVER, IRON], prompt=3000, output=400)
    result, _ = simulate(RunSpec("triton-queue", {"a10": 1}), work)
    reasons = {(r.outcome, r.reason) for r in result.records}
    assert ("rejected", "queue_full") in reasons
    assert ("expired", "worker_queue_timeout") in reasons
    assert all(r.dispatch_s == r.arrival_s for r in result.records if r.outcome != "rejected")  # no gateway queue
