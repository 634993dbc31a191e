"""KV claims: an engine that allocates KV on demand is budgeted for what a sequence holds on
average, its prompt plus half the output that the model's sequences were observed to generate."""

from __future__ import annotations

from dataclasses import replace

from scheduling.scheduler import SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import held_output_share, kv_claim_tokens
from tests.unit.scheduling.factories import BIG, LIMITS, request, tenant, view


def test_a_claim_is_the_prompt_plus_the_share_of_reserved_output() -> None:
    r = request(tenant(), prefill=100, output=1001)
    assert kv_claim_tokens(r) == r.context_tokens == 1101
    assert kv_claim_tokens(r, 0.5) == 100 + 501 and kv_claim_tokens(r, 0.0) == 100
    assert kv_claim_tokens(r, 7.0) == 1101  # the share is clamped to [0, 1]
    assert held_output_share(0.8) == 0.4 and held_output_share(1.5) == 0.5


def _scheduler(on_demand: bool):  # type: ignore[no-untyped-def]
    limits = {**LIMITS, "chat": replace(LIMITS["chat"], kv_on_demand=on_demand)}
    scheduler = build_scheduler(SchedulerConfig(), limits)
    scheduler.update_workers([view("big", BIG, "eu")])  # 8,192 KV tokens
    return scheduler


def _dispatched_after_half_outputs(on_demand: bool) -> tuple[int, int]:
    """Sequences that used half their max_tokens finished; then how many 1,500 + 2,000 fit, and
    the KV tokens the scheduler counts once they are all done."""
    scheduler = _scheduler(on_demand)
    who = tenant(tier=Tier.PREMIUM)
    for step in range(20):  # the observed output share converges to 0.5
        warm = request(who, now=step, prefill=10, output=100)
        scheduler.submit(warm, now=step)
        scheduler.schedule(now=step)
        scheduler.complete(warm.request_id, now=step, generated_tokens=50)
    batch = [request(who, now=20, prefill=1500, output=2000, deadline_in_s=600) for _ in range(3)]
    for r in batch:
        scheduler.submit(r, now=20)
    dispatched = len(scheduler.schedule(now=20).dispatches)
    for r in batch:
        scheduler.complete(r.request_id, now=21, generated_tokens=1000)
    return dispatched, scheduler.loads["big"].kv_tokens


def test_an_on_demand_engine_takes_sequences_by_their_expected_output() -> None:
    assert _dispatched_after_half_outputs(on_demand=True) == (3, 0)  # 3 x (1,500 + ~500) fit 8,192


def test_an_engine_that_reserves_output_takes_sequences_by_max_tokens() -> None:
    assert _dispatched_after_half_outputs(on_demand=False) == (2, 0)  # 2 x 3,500 fit, a third does not
