"""Admission's wait estimate for LLM requests: until the request can start, not until the work
ahead of it has finished (``scheduling.prediction.start_wait``), driven through the ``Scheduler``."""

import dataclasses

import pytest

from scheduling.capacity import CapacityProfile
from scheduling.outcomes import Admitted, Rejected
from scheduling.requests import RequestKind
from scheduling.scheduler import Scheduler, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import ModelLimits
from tests.unit.scheduling.factories import request, tenant, view

# A CPU engine like the local stack's: fast prefill, slow decode, 16 sequences.
CPU = CapacityProfile("cpu", memory_gib=8, max_batch_tokens=32768, max_context_tokens=2048,
                      prefill_tokens_per_s=1000, decode_tokens_per_s=120, cost_per_hour=0.1, max_sequences=16)
LINE_BOUND = {"chat": ModelLimits("chat", RequestKind.LLM, max_prefill_line_s=0.25)}
PREMIUM = tenant("gold", Tier.PREMIUM)


def _scheduler(profile: CapacityProfile = CPU) -> Scheduler:
    scheduler = build_scheduler(SchedulerConfig(), LINE_BOUND)
    scheduler.update_workers([view("w1", profile, models=("chat",))])
    return scheduler


def test_a_burst_that_fits_the_engine_is_admitted_although_its_decode_work_exceeds_the_slo() -> None:
    scheduler = _scheduler()
    outcomes = [scheduler.submit(request(PREMIUM, prefill=60, output=200, slo_s=4.0), now=0.0) for _ in range(16)]
    scheduler.schedule(0.0)
    assert all(isinstance(outcome, Admitted) for outcome in outcomes)
    # 16 x 260 tokens at 120 tokens/s would be 35 s; the last one starts after 15 prompts of 60 tokens.
    last = outcomes[-1]
    assert isinstance(last, Admitted)
    assert last.predicted_wait_s == pytest.approx(15 * 60 / 1000, rel=0.01)


def test_the_wait_counts_the_prompts_already_in_the_engines_line() -> None:
    scheduler = _scheduler()
    for _ in range(3):
        scheduler.submit(request(PREMIUM, prefill=500, output=10, slo_s=4.0), now=0.0)
    scheduler.schedule(0.0)
    estimate = scheduler.estimate(request(PREMIUM, prefill=10, output=10), scheduler.endpoints("chat", 0.0))
    # The first prompt (0.5 s) is in the engine, two wait in the gateway behind the 0.25 s line bound.
    assert estimate.capacity_wait_s == 0.0
    assert estimate.predicted_wait_s == pytest.approx((3 * 500 + 3) / 1000, rel=0.02)


def test_when_the_sequences_are_full_the_request_waits_for_completions_at_the_decode_speed() -> None:
    scheduler = _scheduler(dataclasses.replace(CPU, max_sequences=2))
    for _ in range(2):
        scheduler.submit(request(PREMIUM, prefill=10, output=110), now=0.0)
    scheduler.schedule(10.0)  # both prefilled long ago: only capacity holds the next one
    estimate = scheduler.estimate(request(PREMIUM, prefill=10, output=110), scheduler.endpoints("chat", 10.0))
    assert estimate.capacity_wait_s == pytest.approx(120 / 120)
    assert estimate.predicted_wait_s == estimate.capacity_wait_s


def test_a_backlog_past_the_kv_budget_is_rejected_as_a_predicted_slo_miss() -> None:
    scheduler = _scheduler(dataclasses.replace(CPU, max_batch_tokens=2000))
    for _ in range(40):
        scheduler.submit(request(PREMIUM, prefill=100, output=100), now=0.0)
    outcome = scheduler.submit(request(PREMIUM, prefill=100, output=100, slo_s=4.0), now=0.0)
    assert isinstance(outcome, Rejected)
    assert outcome.signals["capacity_wait_s"] > 4.0


def test_a_request_larger_than_the_whole_budget_on_an_idle_engine_does_not_wait() -> None:
    scheduler = _scheduler(dataclasses.replace(CPU, max_batch_tokens=100))
    estimate = scheduler.estimate(request(PREMIUM, prefill=150, output=100), scheduler.endpoints("chat", 0.0))
    assert estimate.capacity_wait_s == 0.0
