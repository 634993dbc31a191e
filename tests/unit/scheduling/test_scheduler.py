from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.outcomes import Admitted, Rejected, RejectReason
from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import BIG, LIMITS, SMALL, request, tenant, view


def _scheduler(policy: Policy = Policy.FAIR, max_queued: int = 4096):  # type: ignore[no-untyped-def]
    scheduler = build_scheduler(SchedulerConfig(policy=policy, max_queued=max_queued), LIMITS)
    scheduler.update_workers([view("big", BIG, "eu"), view("small", SMALL, "us")])
    return scheduler


def test_a_request_is_dispatched_when_a_worker_has_budget() -> None:
    scheduler = _scheduler()
    admitted = scheduler.submit(request(tenant(), prefill=100, output=100), now=0)
    assert isinstance(admitted, Admitted)
    plan = scheduler.schedule(now=0)
    assert [d.request_id for d in plan.dispatches] == [admitted.request_id]


def test_kv_budget_holds_requests_in_the_gateway_until_one_finishes() -> None:
    scheduler = _scheduler()
    scheduler.update_workers([view("big", BIG, "eu")])  # 8192 KV tokens
    who = tenant(tier=Tier.PREMIUM)
    first, second, third = (request(who, prefill=2000, output=2000, deadline_in_s=600) for _ in range(3))
    for r in (first, second, third):
        assert isinstance(scheduler.submit(r, now=0), Admitted)
    assert len(scheduler.schedule(now=0).dispatches) == 2
    assert scheduler.loads["big"].kv_tokens == 8000
    scheduler.complete(first.request_id, now=1, generated_tokens=2000)
    assert [d.request_id for d in scheduler.schedule(now=1).dispatches] == [third.request_id]


def test_queued_requests_expire_at_their_deadline_and_are_never_dispatched() -> None:
    scheduler = _scheduler()
    scheduler.update_workers([view("big", BIG, "eu")])
    who = tenant(tier=Tier.PREMIUM)
    hog = request(who, prefill=100, output=8092)  # holds the whole KV budget
    scheduler.update_workers([view("big", replace(BIG, max_context_tokens=8192), "eu")])
    scheduler.submit(hog, now=0)
    scheduler.schedule(now=0)
    waiting = request(who, prefill=10, output=10, deadline_in_s=0.5)
    scheduler.submit(waiting, now=0)
    assert scheduler.schedule(now=0.1).dispatches == ()
    assert scheduler.next_deadline_s() == 0.5
    plan = scheduler.schedule(now=0.51)
    assert [e.request_id for e in plan.expired] == [waiting.request_id]
    scheduler.complete(hog.request_id, now=0.6, generated_tokens=10)
    assert scheduler.schedule(now=0.6).dispatches == ()


def test_a_cancelled_queued_request_leaves_the_queue_and_frees_its_quota() -> None:
    scheduler = _scheduler()
    scheduler.update_workers([view("big", BIG, "eu")])
    scheduler.update_workers([view("big", replace(BIG, max_context_tokens=8192), "eu")])
    who = tenant(tier=Tier.PREMIUM, max_concurrent=2)
    scheduler.submit(request(who, prefill=4000, output=4192), now=0)
    scheduler.schedule(now=0)
    queued = request(who)
    scheduler.submit(queued, now=0)
    assert scheduler.cancel(queued.request_id, now=0.1)
    assert queued.request_id not in scheduler.queue
    assert isinstance(scheduler.submit(request(who), now=0.2), Admitted)


def test_residency_rejects_when_no_worker_is_in_an_allowed_region() -> None:
    rejected = _scheduler().submit(request(tenant(regions=("ap",))), now=0)
    assert isinstance(rejected, Rejected) and rejected.reason is RejectReason.RESIDENCY


def test_a_full_queue_sheds_the_newest_batch_request_for_a_premium_one() -> None:
    scheduler = _scheduler(max_queued=2)
    scheduler.update_workers([view("big", replace(BIG, max_context_tokens=8192), "eu")])
    hog = request(tenant("hog", Tier.PREMIUM), prefill=100, output=8092)  # holds the whole KV budget
    scheduler.submit(hog, now=0)
    scheduler.schedule(now=0)
    batch = tenant("b", Tier.BATCH)
    old, new = request(batch, now=0, deadline_in_s=600), request(batch, now=1, deadline_in_s=600)
    assert isinstance(scheduler.submit(old, now=0), Admitted)
    assert isinstance(scheduler.submit(new, now=1), Admitted)
    premium = request(tenant("p", Tier.PREMIUM), now=2)
    assert isinstance(scheduler.submit(premium, now=2), Admitted)
    plan = scheduler.schedule(now=2)
    assert [s.request_id for s in plan.shed] == [new.request_id]
    assert plan.shed[0].reason is RejectReason.TIER_SHED


def test_fair_policy_serves_a_quiet_tenant_beside_a_flooding_one_and_fifo_behind_it() -> None:
    for policy, quiet_first in ((Policy.FAIR, True), (Policy.FIFO, False)):
        scheduler = _scheduler(policy)
        scheduler.update_workers([view("big", replace(BIG, max_context_tokens=8192), "eu")])
        noisy, quiet = tenant("noisy", Tier.PREMIUM), tenant("quiet", Tier.PREMIUM)
        hog = request(noisy, prefill=4000, output=4192)
        scheduler.submit(hog, now=0)
        scheduler.schedule(now=0)
        flood = [request(noisy, now=0.01 * i, prefill=2000, output=2000, deadline_in_s=900) for i in range(20)]
        for r in flood:
            scheduler.submit(r, now=r.arrival_s)
        scheduler.schedule(now=0.3)
        calm = request(quiet, now=0.3, prefill=2000, output=2000, deadline_in_s=900)
        scheduler.submit(calm, now=0.3)
        scheduler.complete(hog.request_id, now=1.0, generated_tokens=4000)
        dispatched = [d.request_id for d in scheduler.schedule(now=1.0).dispatches]
        assert len(dispatched) == 2
        assert (calm.request_id in dispatched) is quiet_first


_ops = st.lists(st.tuples(st.sampled_from(["submit", "schedule", "complete", "cancel", "tick"]),
                          st.integers(0, 3), st.integers(1, 3000)), max_size=80)


@settings(max_examples=120, deadline=None)
@given(_ops, st.sampled_from(list(Policy)))
def test_every_request_ends_in_exactly_one_outcome(ops: list[tuple[str, int, int]], policy: Policy) -> None:
    scheduler = _scheduler(policy, max_queued=5)
    tenants = [tenant("p", Tier.PREMIUM, max_concurrent=6), tenant("s", Tier.STANDARD, tokens_per_minute=20000),
               tenant("b", Tier.BATCH, requests_per_second=3), tenant("eu", Tier.BATCH, regions=("eu",))]
    outcomes: dict[str, list[str]] = {}
    deadlines: dict[str, float] = {}
    now = 0.0

    def apply_plan() -> None:
        plan = scheduler.schedule(now)
        for d in plan.dispatches:
            assert now < deadlines[d.request_id], "dispatched after its deadline"
            outcomes[d.request_id].append("dispatched")
        for e in plan.expired:
            outcomes[e.request_id].append("expired")
        for s in plan.shed:
            outcomes[s.request_id].append("rejected")

    for op, who, size in ops:
        if op == "submit":
            r = request(tenants[who], now=now, prefill=size, output=size // 2, deadline_in_s=size / 1000)
            deadlines[r.request_id] = r.deadline_s
            outcomes[r.request_id] = ["rejected"] if isinstance(scheduler.submit(r, now), Rejected) else []
        elif op == "tick":
            now += size / 1000
        elif op == "schedule":
            apply_plan()
        elif scheduler.in_flight or len(scheduler.queue):
            pool = list(scheduler.in_flight) if op == "complete" else list(scheduler.in_flight) + [
                r.request_id for r in scheduler.queue.queued()]
            if pool:
                target = sorted(pool)[size % len(pool)]
                if op == "complete":
                    scheduler.complete(target, now, generated_tokens=size // 4)
                    outcomes[target].append("completed")
                else:
                    scheduler.cancel(target, now)
                    outcomes[target].append("cancelled")
    now += 10
    apply_plan()
    for request_id in list(scheduler.in_flight):
        scheduler.complete(request_id, now)
        outcomes[request_id].append("completed")
    for request_id, seen in outcomes.items():
        terminal = [o for o in seen if o != "dispatched"]
        assert len(terminal) == 1, (request_id, seen)
    assert not scheduler.in_flight and len(scheduler.queue) == 0
    assert all(scheduler.admission.in_flight(t.name) == 0 for t in tenants)


def test_lower_tiers_fill_only_their_share_of_a_worker_and_premium_finds_room() -> None:
    shares = {Tier.PREMIUM: 1.0, Tier.STANDARD: 0.75, Tier.BATCH: 0.5}
    limits = {name: replace(limit, tier_share=shares) for name, limit in LIMITS.items()}
    scheduler = build_scheduler(SchedulerConfig(), limits)
    scheduler.update_workers([view("big", replace(BIG, max_sequences=8), "eu")])
    batch = [request(tenant("b", Tier.BATCH), prefill=10, output=10, deadline_in_s=600) for _ in range(8)]
    for r in batch:
        scheduler.submit(r, now=0)
    assert len(scheduler.schedule(now=0).dispatches) == 4
    premium = request(tenant("p", Tier.PREMIUM), prefill=10, output=10)
    scheduler.submit(premium, now=0)
    assert [d.request_id for d in scheduler.schedule(now=0).dispatches] == [premium.request_id]


def test_the_fifo_baseline_admits_without_quotas_or_estimates() -> None:
    scheduler = _scheduler(Policy.FIFO)
    who = tenant(max_concurrent=1, requests_per_second=1)
    decisions = [scheduler.submit(request(who, prefill=2000, output=2000, deadline_in_s=0.01), now=0)
                 for _ in range(10)]
    assert all(isinstance(d, Admitted) for d in decisions)


def test_service_from_other_gateways_orders_the_tenants_here() -> None:
    scheduler = _scheduler()
    scheduler.update_workers([view("big", BIG, "eu")])
    hold = request(tenant(tier=Tier.PREMIUM), prefill=4000, output=4000, deadline_in_s=600)
    scheduler.submit(hold, now=0)
    scheduler.schedule(now=0)  # the worker is full: the next two wait, both backlogged
    busy, idle = tenant(name="busy-elsewhere"), tenant(name="idle-elsewhere")
    first, second = request(busy, prefill=2000, output=2000), request(idle, prefill=2000, output=2000)
    scheduler.submit(first, now=0)
    scheduler.submit(second, now=0)
    scheduler.add_service({"busy-elsewhere": 1e6})  # another gateway served it meanwhile
    assert scheduler.service_counters()["busy-elsewhere"] == 1e6
    scheduler.complete(hold.request_id, now=1, generated_tokens=4000)
    dispatched = [d.request_id for d in scheduler.schedule(now=1).dispatches]
    assert dispatched[0] == second.request_id  # without the other gateway's service, first would go first


def test_a_request_whose_worker_failed_is_queued_again_and_dispatched_to_a_healthy_worker() -> None:
    scheduler = _scheduler()
    scheduler.update_workers([view("a", BIG, "eu"), view("b", BIG, "eu")])
    who = tenant(tier=Tier.PREMIUM, max_concurrent=1, requests_per_second=1)
    first = request(who, prefill=100, output=100)
    assert isinstance(scheduler.submit(first, now=0), Admitted)
    (dispatch,) = scheduler.schedule(now=0).dispatches
    counter = scheduler.service_counters()[who.name]
    failed = dispatch.worker_id
    healthy = "b" if failed == "a" else "a"
    scheduler.update_workers([view(failed, BIG, "eu", healthy=False), view(healthy, BIG, "eu")])
    assert scheduler.requeue(first.request_id, now=1, deadline_s=5)
    assert scheduler.loads[failed].kv_tokens == 0
    (again,) = scheduler.schedule(now=1).dispatches
    assert (again.request_id, again.worker_id) == (first.request_id, healthy)
    assert scheduler.service_counters()[who.name] == counter  # charged once, not twice
    assert not scheduler.requeue("unknown", now=1, deadline_s=5)


def test_a_requeued_request_keeps_its_admission_and_expires_at_its_retry_deadline() -> None:
    scheduler = _scheduler()
    scheduler.update_workers([view("a", BIG, "eu")])
    who = tenant(tier=Tier.PREMIUM, max_concurrent=1, requests_per_second=1)
    first = request(who)
    scheduler.submit(first, now=0)
    scheduler.schedule(now=0)
    scheduler.update_workers([view("a", BIG, "eu", healthy=False)])
    assert scheduler.requeue(first.request_id, now=0.5, deadline_s=2.0)
    assert scheduler.admission.in_flight(who.name) == 1  # still holds its slot; no second quota taken
    assert scheduler.schedule(now=1.0).dispatches == ()  # no healthy worker: it waits
    assert scheduler.next_deadline_s() == 2.0
    plan = scheduler.schedule(now=2.0)
    assert [e.request_id for e in plan.expired] == [first.request_id]
    assert scheduler.admission.in_flight(who.name) == 0
