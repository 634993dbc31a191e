"""The baseline plugins the simulator plugs into the core: strict-tier queue, round-robin placement."""

from __future__ import annotations

from scheduling.placement.round_robin import round_robin_placement
from scheduling.priority_queue import TierPriorityQueue
from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import LIMITS, request, tenant, view


def test_priority_queue_serves_higher_tiers_first_then_arrival_order_whoever_the_tenant() -> None:
    queue = TierPriorityQueue()
    heavy, light, vip = tenant("heavy"), tenant("light"), tenant("vip", Tier.PREMIUM)
    first, second, third = request(heavy, 0.0), request(heavy, 1.0), request(light, 2.0)
    urgent = request(vip, 3.0)
    for r in (first, second, third, urgent):
        queue.push(r)
    assert [r.request_id for r in queue.ordered()] == [urgent.request_id, first.request_id, second.request_id,
                                                        third.request_id]
    assert next(queue.candidates(lambda lane: False)).request_id == urgent.request_id
    assert queue.remove(urgent.request_id) is urgent and len(queue) == 3 and urgent.request_id not in queue


def test_scheduler_with_priority_queue_dispatches_premium_before_earlier_standard() -> None:
    scheduler = build_scheduler(SchedulerConfig(Policy.FIFO), LIMITS, queue=TierPriorityQueue())
    scheduler.update_workers([view("w1")])
    blockers = [request(tenant("s"), 0.0, prefill=4000, output=90) for _ in range(2)]  # fill the KV budget
    standard = request(tenant("s"), 0.0, prefill=4000, output=90)
    premium = request(tenant("p", Tier.PREMIUM), 0.1, prefill=10, output=10)
    for blocker in blockers:
        scheduler.submit(blocker, 0.0)
    assert len(scheduler.schedule(0.0).dispatches) == 2
    scheduler.submit(standard, 0.0)
    scheduler.submit(premium, 0.1)
    assert scheduler.schedule(0.1).dispatches == ()
    scheduler.complete(blockers[0].request_id, 1.0, 90)
    assert [d.request_id for d in scheduler.schedule(1.0).dispatches] == [premium.request_id]


def test_round_robin_placement_rotates_over_workers_whatever_their_load() -> None:
    scheduler = build_scheduler(SchedulerConfig(Policy.FIFO), LIMITS, placement=round_robin_placement)
    scheduler.update_workers([view("w1"), view("w2"), view("w3")])
    who = tenant()
    chosen = []
    for i in range(6):
        scheduler.submit(request(who, float(i)), float(i))
        chosen += [d.worker_id for d in scheduler.schedule(float(i)).dispatches]
    assert chosen == ["w1", "w2", "w3", "w1", "w2", "w3"]
