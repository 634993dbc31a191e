"""TTFT expiry: a queued request that can no longer meet its time-to-first-token objective expires
(the gateway answers 504) instead of being dispatched to complete late."""

from dataclasses import replace

import pytest

from scheduling.admission import AdmissionConfig
from scheduling.outcomes import Admitted
from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import BIG, LIMITS, request, tenant, view

LONG = replace(BIG, max_context_tokens=8192)  # 4,000 prefill tokens/s, 8,192 KV tokens


def _scheduler(policy: Policy = Policy.FAIR, expire_at_ttft: bool = True,  # type: ignore[no-untyped-def]
               admission: AdmissionConfig | None = None):
    """A worker whose KV budget a premium hog fills; admission's own wait check is off unless
    ``admission`` says otherwise (it would refuse what these tests queue: the hog holds the budget)."""
    admission = admission or AdmissionConfig(reject_predicted_misses=False)
    config = SchedulerConfig(policy=policy, expire_at_ttft=expire_at_ttft, admission=admission)
    scheduler = build_scheduler(config, LIMITS)
    scheduler.update_workers([view("big", LONG, "eu")])
    hog = request(tenant("hog", Tier.PREMIUM), prefill=4000, output=4192)  # fills the KV budget
    scheduler.submit(hog, now=0)
    assert len(scheduler.schedule(now=0).dispatches) == 1
    return scheduler, hog


def test_a_queued_request_expires_when_its_ttft_objective_can_no_longer_be_met() -> None:
    scheduler, _ = _scheduler()
    waiting = request(tenant(tier=Tier.PREMIUM), prefill=1999, output=10, deadline_in_s=30, slo_s=2.0)
    assert isinstance(scheduler.submit(waiting, now=0), Admitted)
    assert scheduler.next_deadline_s() == pytest.approx(2.0 - 2000 / 4000)  # objective minus its own prefill
    assert scheduler.schedule(now=1.4).expired == ()
    assert [e.request_id for e in scheduler.schedule(now=1.5).expired] == [waiting.request_id]


def test_without_ttft_expiry_a_request_waits_until_its_queue_deadline() -> None:
    scheduler, _ = _scheduler(expire_at_ttft=False)
    waiting = request(tenant(tier=Tier.PREMIUM), prefill=1999, output=10, deadline_in_s=30, slo_s=2.0)
    scheduler.submit(waiting, now=0)
    assert scheduler.next_deadline_s() == 30


def test_the_fifo_baseline_expires_only_at_the_queue_deadline() -> None:
    scheduler, _ = _scheduler(policy=Policy.FIFO)
    waiting = request(tenant(tier=Tier.PREMIUM), prefill=1999, output=10, deadline_in_s=30, slo_s=2.0)
    scheduler.submit(waiting, now=0)
    assert scheduler.next_deadline_s() == 30


def test_a_request_no_worker_could_serve_in_time_is_served_best_effort_until_its_deadline() -> None:
    scheduler, _ = _scheduler()
    hopeless = request(tenant(tier=Tier.PREMIUM), prefill=6000, output=10, deadline_in_s=30, slo_s=1.0)
    assert isinstance(scheduler.submit(hopeless, now=0), Admitted)  # 1.5 s of prefill on an idle worker
    assert scheduler.next_deadline_s() == 30


def test_a_request_that_would_start_too_late_on_the_chosen_worker_expires_instead_of_dispatching() -> None:
    scheduler, hog = _scheduler(admission=AdmissionConfig(reject_predicted_misses=False))
    who = tenant(tier=Tier.PREMIUM)
    first, second = (request(who, prefill=2000, output=10, deadline_in_s=30, slo_s=1.2) for _ in range(2))
    for queued in (first, second):
        assert isinstance(scheduler.submit(queued, now=0), Admitted)
    scheduler.complete(hog.request_id, now=0.3, generated_tokens=10)
    plan = scheduler.schedule(now=0.3)
    assert [d.request_id for d in plan.dispatches] == [first.request_id]  # first token due by 0.3 + 0.5
    assert [e.request_id for e in plan.expired] == [second.request_id]  # behind it: 0.3 + 1.0 > 1.2
    assert plan.expired[0].late_by_s == pytest.approx(0.1, abs=0.01)


def test_admission_refuses_a_request_whose_wait_plus_prefill_would_miss_its_objective() -> None:
    scheduler, _ = _scheduler(admission=AdmissionConfig())
    who = tenant(tier=Tier.PREMIUM)
    scheduler.submit(request(who, prefill=2000, output=2000, deadline_in_s=30, slo_s=3.0), now=0)
    late = scheduler.submit(request(who, prefill=3000, output=10, deadline_in_s=30, slo_s=3.0), now=0)
    assert not isinstance(late, Admitted) and late.reason.value == "predicted_slo_miss"
