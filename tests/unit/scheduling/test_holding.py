"""Held for capacity: a model at zero replicas queues its requests for its cold start (pure core)."""

from __future__ import annotations

import pytest

from scheduling.holding import ColdStart, refuse_hold
from scheduling.outcomes import Admitted, Rejected, RejectReason
from scheduling.scheduler import Scheduler, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import BIG, LIMITS, request, tenant, view

COLD_START_S = 8.0


def _cold_scheduler(starting_since_s: float | None = None, regions: tuple[str, ...] = ()) -> Scheduler:
    """A scheduler whose only worker serves chat, while embed may scale to zero and is at zero."""
    scheduler = build_scheduler(SchedulerConfig(), LIMITS)
    scheduler.update_workers([view("w0", BIG, "eu", models=("chat",))])
    scheduler.update_cold_starts([ColdStart("embed", COLD_START_S, starting_since_s, frozenset(regions))])
    return scheduler


def _embed_ready(scheduler: Scheduler) -> None:
    scheduler.update_workers([view("w0", BIG, "eu", models=("chat", "embed"))])


def test_a_request_for_a_model_at_zero_is_held_not_refused() -> None:
    scheduler = _cold_scheduler()
    held = request(tenant(), model="embed", deadline_in_s=30)
    admitted = scheduler.submit(held, now=0)
    assert isinstance(admitted, Admitted) and admitted.held
    assert admitted.predicted_wait_s == pytest.approx(COLD_START_S)
    assert scheduler.schedule(now=1).dispatches == ()
    assert scheduler.held_requests() == {"embed": 1}
    status = scheduler.status(held.request_id, now=1)
    assert status is not None and status.held
    assert status.estimated_start_s == pytest.approx(1 + COLD_START_S)  # no replica starting: now + cold start


def test_a_model_without_scale_to_zero_is_still_refused_no_worker() -> None:
    scheduler = build_scheduler(SchedulerConfig(), LIMITS)
    scheduler.update_workers([view("w0", BIG, "eu", models=("chat",))])
    rejected = scheduler.submit(request(tenant(), model="embed"), now=0)
    assert isinstance(rejected, Rejected) and rejected.reason is RejectReason.NO_WORKER


def test_held_requests_are_dispatched_by_the_first_pass_after_a_worker_is_ready() -> None:
    scheduler = _cold_scheduler()
    held = [request(tenant(f"t{i}"), model="embed", deadline_in_s=30) for i in range(5)]
    for r in held:
        assert isinstance(scheduler.submit(r, now=0), Admitted)
    assert scheduler.schedule(now=2).dispatches == ()
    _embed_ready(scheduler)
    plan = scheduler.schedule(now=6)
    assert sorted(d.request_id for d in plan.dispatches) == sorted(r.request_id for r in held)
    assert all(d.queue_wait_s == pytest.approx(6) for d in plan.dispatches)
    assert scheduler.held_requests() == {}


def test_held_requests_leave_in_tier_order_when_the_replica_has_room_for_few() -> None:
    scheduler = _cold_scheduler()
    batch, standard, premium = (tenant(t.value, tier=t) for t in (Tier.BATCH, Tier.STANDARD, Tier.PREMIUM))
    # embed's budget on one worker: 8 rows x 2 per instance = 16 rows; each request takes all of a tier's share
    order = [request(batch, model="embed", rows=16), request(standard, model="embed", rows=16),
             request(premium, model="embed", rows=16)]
    for r in order:
        assert isinstance(scheduler.submit(r, now=0), Admitted)
    _embed_ready(scheduler)
    first = scheduler.schedule(now=5).dispatches
    assert [d.request_id for d in first] == [order[2].request_id]  # premium first, the others still queued
    scheduler.complete(order[2].request_id, now=6)
    assert [d.request_id for d in scheduler.schedule(now=6).dispatches] == [order[1].request_id]
    scheduler.complete(order[1].request_id, now=7)
    assert [d.request_id for d in scheduler.schedule(now=7).dispatches] == [order[0].request_id]


def test_held_tenants_share_the_woken_replica_by_their_counters() -> None:
    scheduler = _cold_scheduler()
    busy, quiet = tenant("busy"), tenant("quiet")
    busy_requests = [request(busy, model="embed", rows=16) for _ in range(3)]  # each fills the replica
    quiet_request = request(quiet, model="embed", rows=16)
    for r in [*busy_requests, quiet_request]:
        scheduler.submit(r, now=0)
    _embed_ready(scheduler)
    served = []
    for step in range(4):
        (dispatch,) = scheduler.schedule(now=5 + step).dispatches
        served.append(dispatch.request_id)
        scheduler.complete(dispatch.request_id, now=5.5 + step)
    # busy came first, then quiet goes before busy's later requests (least counter), not after them
    assert served == [busy_requests[0].request_id, quiet_request.request_id,
                      busy_requests[1].request_id, busy_requests[2].request_id]


def test_a_deadline_before_the_predicted_ready_time_is_refused_model_cold_at_once() -> None:
    scheduler = _cold_scheduler()
    rejected = scheduler.submit(request(tenant(), model="embed", deadline_in_s=2), now=0)
    assert isinstance(rejected, Rejected) and rejected.reason is RejectReason.MODEL_COLD
    assert rejected.retry_after_s == pytest.approx(COLD_START_S)
    assert rejected.signals["deadline_in_s"] == pytest.approx(2)
    assert len(scheduler.queue) == 0 and scheduler.admission.in_flight("t") == 0


def test_a_replica_already_starting_shortens_the_predicted_ready_time() -> None:
    scheduler = _cold_scheduler(starting_since_s=-6.0)  # began 6 s ago: ready in 2 s
    admitted = scheduler.submit(request(tenant(), model="embed", deadline_in_s=3), now=0)
    assert isinstance(admitted, Admitted) and admitted.predicted_wait_s == pytest.approx(2)
    late = ColdStart("embed", COLD_START_S, starting_since_s=-20.0)  # overdue: ready any moment, not in the past
    assert late.ready_at_s(0.0) == 0.0


def test_a_held_request_expires_at_its_deadline_marked_cold_not_at_its_ttft_objective() -> None:
    scheduler = _cold_scheduler()
    held = request(tenant(), model="embed", deadline_in_s=10, slo_s=0.5)
    assert isinstance(scheduler.submit(held, now=0), Admitted)
    assert scheduler.schedule(now=5).expired == ()  # far past its TTFT objective: still held
    assert scheduler.next_deadline_s() == pytest.approx(10)
    expired = scheduler.schedule(now=10.2).expired
    assert [e.request_id for e in expired] == [held.request_id] and expired[0].held
    assert expired[0].late_by_s == pytest.approx(0.2)
    assert expired[0].ready_in_s == pytest.approx(COLD_START_S)  # nothing started: still a whole cold start
    assert scheduler.admission.in_flight("t") == 0


def test_a_request_that_expires_after_its_model_woke_is_not_marked_cold() -> None:
    scheduler = _cold_scheduler()
    hog = request(tenant("hog", tier=Tier.PREMIUM), model="embed", rows=16, deadline_in_s=60)
    waiting = request(tenant(), model="embed", rows=16, deadline_in_s=10)
    scheduler.submit(hog, now=0)
    scheduler.submit(waiting, now=0)
    _embed_ready(scheduler)
    assert [d.request_id for d in scheduler.schedule(now=5).dispatches] == [hog.request_id]
    expired = scheduler.schedule(now=11).expired
    assert [e.request_id for e in expired] == [waiting.request_id] and not expired[0].held


def test_held_requests_still_take_the_tenants_quotas() -> None:
    scheduler = _cold_scheduler()
    limited = tenant("limited", max_concurrent=1)
    assert isinstance(scheduler.submit(request(limited, model="embed"), now=0), Admitted)
    rejected = scheduler.submit(request(limited, model="embed"), now=0)
    assert isinstance(rejected, Rejected) and rejected.reason is RejectReason.MAX_CONCURRENT


def test_a_tenant_whose_residency_excludes_every_pool_of_the_model_is_refused_residency() -> None:
    scheduler = _cold_scheduler(regions=("eu",))
    rejected = scheduler.submit(request(tenant(regions=("us",)), model="embed"), now=0)
    assert isinstance(rejected, Rejected) and rejected.reason is RejectReason.RESIDENCY
    assert refuse_hold(request(tenant(regions=("eu",)), model="embed"),
                       scheduler.cold_starts["embed"], 0.0) is None


def test_a_cancelled_held_request_leaves_the_queue() -> None:
    scheduler = _cold_scheduler()
    held = request(tenant(), model="embed")
    scheduler.submit(held, now=0)
    assert scheduler.cancel(held.request_id, now=1)
    assert scheduler.held_requests() == {} and scheduler.admission.in_flight("t") == 0


def test_a_negative_cold_start_is_refused() -> None:
    with pytest.raises(ValueError, match="cold_start_s"):
        ColdStart("embed", -1.0)
