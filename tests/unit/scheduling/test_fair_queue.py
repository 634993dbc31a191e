from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.fair_queue import FairQueue
from scheduling.requests import Request
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import request, tenant


def _serve_one(queue: FairQueue) -> Request | None:
    chosen = next(queue.candidates(lambda lane: False), None)
    if chosen is not None:
        queue.remove(chosen.request_id)
        queue.charge(chosen)
    return chosen


def test_higher_tiers_are_served_first_whatever_the_counters() -> None:
    queue = FairQueue()
    batch, premium = tenant("b", Tier.BATCH), tenant("p", Tier.PREMIUM)
    queue.counters["p"] = 1e9
    queue.push(request(batch))
    queue.push(request(premium))
    served = _serve_one(queue)
    assert served is not None and served.tenant.name == "p"


def test_backlogged_tenants_get_service_in_proportion_to_weight() -> None:
    queue = FairQueue()
    heavy, light = tenant("heavy", weight=3.0), tenant("light", weight=1.0)
    for _ in range(400):
        queue.push(request(heavy, prefill=10, output=0))
        queue.push(request(light, prefill=10, output=0))
    served = [_serve_one(queue) for _ in range(400)]
    share = sum(1 for r in served if r is not None and r.tenant.name == "heavy") / len(served)
    assert 0.73 <= share <= 0.77


def test_inside_a_tenant_the_earliest_deadline_goes_first() -> None:
    queue = FairQueue()
    who = tenant()
    late, soon = request(who, deadline_in_s=10.0), request(who, deadline_in_s=1.0)
    queue.push(late)
    queue.push(soon)
    assert _serve_one(queue) == soon


def test_a_tenant_returning_from_idle_banks_no_credit() -> None:
    queue = FairQueue()
    busy, idle = tenant("busy"), tenant("idle")
    for _ in range(50):
        queue.push(request(busy))
        _serve_one(queue)
    queue.push(request(busy))
    queue.push(request(idle))
    assert queue.counters["idle"] == queue.counters["busy"]


def test_a_blocked_lane_does_not_hold_back_another_models_requests() -> None:
    queue = FairQueue()
    who = tenant()
    chat, embed = request(who, model="chat", deadline_in_s=1), request(who, model="embed", deadline_in_s=5)
    queue.push(chat)
    queue.push(embed)
    first = next(queue.candidates(lambda lane: lane[0] == "chat"))
    assert first == embed


_arrivals = st.lists(st.tuples(st.sampled_from("AB"), st.integers(1, 200), st.booleans()), min_size=1, max_size=120)


@settings(max_examples=150, deadline=None)
@given(_arrivals, st.sampled_from([1.0, 2.0, 3.0]))
def test_weighted_service_gap_of_backlogged_tenants_stays_within_twice_the_largest_cost(
        steps: list[tuple[str, int, bool]], weight_b: float) -> None:
    queue = FairQueue(input_weight=1.0, output_weight=1.0)
    tenants = {"A": tenant("A", weight=1.0), "B": tenant("B", weight=weight_b)}
    largest = max(cost / tenants[name].weight for name, cost, _ in steps)
    backlog = {"A": 0, "B": 0}
    service = {"A": 0.0, "B": 0.0}
    both_since: dict[str, float] | None = None
    for name, cost, serve in steps:
        queue.push(request(tenants[name], prefill=cost, output=0))
        backlog[name] += 1
        if both_since is None and backlog["A"] and backlog["B"]:
            both_since = dict(service)
        if not serve:
            continue
        served = _serve_one(queue)
        assert served is not None
        backlog[served.tenant.name] -= 1
        service[served.tenant.name] += queue.charge_of(served)
        if both_since is not None:
            gap = (service["A"] - both_since["A"]) - (service["B"] - both_since["B"])
            assert abs(gap) <= 2 * largest + 1e-9
        if not (backlog["A"] and backlog["B"]):
            both_since = None


def test_a_tenant_between_requests_keeps_its_counter_within_the_lift_grace() -> None:
    queue = FairQueue(lift_grace_s=2.0)
    busy, returning = tenant("busy"), tenant("returning")
    queue.counters.update({"busy": 100.0, "returning": 10.0})
    queue.push(request(busy, now=0.0))
    queue.push(request(returning, now=0.0))  # first request ever: lifted among the backlogged
    assert queue.counters["returning"] == 100.0
    queue.counters["returning"] = 10.0  # as if other gateways' service had been counted for busy
    served = _serve_one(queue)
    assert served is not None and served.tenant.name == "returning"  # its queue is empty now
    before = queue.counters["returning"]
    queue.push(request(returning, now=1.5))  # 1.5 s after its previous request: between requests
    assert queue.counters["returning"] == before < queue.counters["busy"]
    _serve_one(queue)
    _serve_one(queue)
    queue.push(request(busy, now=5.0))
    queue.push(request(returning, now=5.0 + 2.5))  # 6 s after its previous request: idle, lifted
    assert queue.counters["returning"] == queue.counters["busy"]


def _cost(queue: FairQueue, served: Request) -> float:
    return queue.charge_of(served) * served.tenant.weight


@settings(max_examples=60, deadline=None)
@given(share=st.sampled_from([0.05, 0.1, 0.25]),
       premium_sizes=st.lists(st.tuples(st.integers(1, 400), st.integers(0, 400)), min_size=50, max_size=300),
       batch_sizes=st.lists(st.tuples(st.integers(1, 400), st.integers(0, 400)), min_size=5, max_size=40))
def test_a_backlogged_lower_band_gets_its_minimum_share_under_sustained_premium_load(
        share: float, premium_sizes: list[tuple[int, int]], batch_sizes: list[tuple[int, int]]) -> None:
    """While the batch band stays backlogged, its dispatched cost is at least ``share`` of the total
    minus one request's cost, however premium keeps arriving (one new premium per dispatch)."""
    queue = FairQueue(min_share={Tier.BATCH: share})
    premium, batch = tenant("p", Tier.PREMIUM, weight=4.0), tenant("b", Tier.BATCH)
    for prefill, output in batch_sizes:
        queue.push(request(batch, prefill=prefill, output=output))
    largest = max(_cost(queue, request(batch, prefill=p, output=o)) for p, o in [*premium_sizes, *batch_sizes])
    queue.push(request(premium, prefill=premium_sizes[0][0], output=premium_sizes[0][1]))
    total = batch_cost = 0.0
    for prefill, output in premium_sizes[1:]:
        queue.push(request(premium, prefill=prefill, output=output))  # premium never runs dry
        served = _serve_one(queue)
        assert served is not None
        total += _cost(queue, served)
        batch_cost += _cost(queue, served) if served.tier is Tier.BATCH else 0.0
        if not any(r.tier is Tier.BATCH for r in queue.queued()):
            break
        assert batch_cost >= share * total - largest


def test_the_wait_bound_holds_for_the_head_of_the_batch_band() -> None:
    """Equal costs c, share m: the batch head waits at most (Q + c) / m of dispatched cost, Q its
    band's cost ahead of it (its own included): the bound in scheduling/fair_queue.py."""
    share, cost = 0.1, 20.0  # prefill 10 + 2 x output 5
    queue = FairQueue(min_share={Tier.BATCH: share})
    premium, batch = tenant("p", Tier.PREMIUM), tenant("b", Tier.BATCH)
    target = request(batch, prefill=10, output=5)
    queue.push(target)
    dispatched = 0.0
    for _ in range(1000):
        queue.push(request(premium, prefill=10, output=5))
        served = _serve_one(queue)
        assert served is not None
        dispatched += cost
        if served is target:
            break
    assert served is target and dispatched <= (cost + cost) / share


def test_without_a_minimum_share_premium_load_starves_batch() -> None:
    queue = FairQueue()
    premium, batch = tenant("p", Tier.PREMIUM), tenant("b", Tier.BATCH)
    queue.push(request(batch))
    for _ in range(200):
        queue.push(request(premium))
        served = _serve_one(queue)
        assert served is not None and served.tier is Tier.PREMIUM


def test_a_band_that_empties_starts_its_share_afresh() -> None:
    """Idle time banks no share: a band that comes back owes nothing for what it missed."""
    queue = FairQueue(min_share={Tier.BATCH: 0.5})
    premium, batch = tenant("p", Tier.PREMIUM), tenant("b", Tier.BATCH)
    for _ in range(50):
        queue.push(request(premium))
        _serve_one(queue)
    queue.push(request(batch))
    queue.push(request(premium))
    assert _serve_one(queue).tier is Tier.PREMIUM  # type: ignore[union-attr]
    assert _serve_one(queue).tier is Tier.BATCH  # type: ignore[union-attr]
