"""What a prompt costs an engine, learned from first tokens (``scheduling.prediction.prefill_cost``)."""

from dataclasses import replace

import pytest

from scheduling.prediction.prefill_cost import PrefillCost
from scheduling.prediction.prefill_line import PrefillLine, PrefillSample
from scheduling.requests import RequestKind
from scheduling.scheduler import SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import ModelLimits
from tests.unit.scheduling.factories import BIG, request, tenant, view

PROFILE_TOKENS_PER_S = 320.0


def test_without_samples_the_cost_is_the_profiles_speed() -> None:
    cost = PrefillCost().coefficients(PROFILE_TOKENS_PER_S)
    assert cost.overhead_s == 0.0
    assert cost.seconds(640) == pytest.approx(2.0)


def test_an_engine_slower_than_its_profile_is_learned_within_a_few_prompts() -> None:
    cost = PrefillCost()
    for _ in range(5):
        cost.observe(400, 400 / 185)  # the host prefills 185 tokens/s, not 320
    after_five = cost.coefficients(PROFILE_TOKENS_PER_S).seconds(400)
    for _ in range(40):
        cost.observe(400, 400 / 185)
    settled = cost.coefficients(PROFILE_TOKENS_PER_S).seconds(400)
    assert 400 / 320 < after_five < settled
    assert settled == pytest.approx(400 / 185, rel=0.05)


def test_a_fixed_cost_per_prompt_is_told_from_the_speed_by_prompt_lengths() -> None:
    cost = PrefillCost()
    for _ in range(30):  # cached prompts (30 tokens) cost a 0.25 s step, cold ones (800) 2.75 s
        cost.observe(30, 0.25 + 30 / 320)
        cost.observe(800, 0.25 + 800 / 320)
    fit = cost.coefficients(PROFILE_TOKENS_PER_S)
    assert fit.overhead_s == pytest.approx(0.25, rel=0.1)
    assert fit.tokens_per_s == pytest.approx(320, rel=0.05)
    assert fit.seconds(30) == pytest.approx(0.25 + 30 / 320, rel=0.1)  # not 3 x 30 tokens at a speed


def test_a_stalled_engine_cannot_make_a_worker_look_useless() -> None:
    cost = PrefillCost()
    for _ in range(30):
        cost.observe(400, 400.0)  # 1 token/s
    assert cost.coefficients(PROFILE_TOKENS_PER_S).tokens_per_s == pytest.approx(PROFILE_TOKENS_PER_S / 4)


def test_the_fit_follows_the_engine_back_when_it_speeds_up() -> None:
    cost = PrefillCost()
    for _ in range(30):
        cost.observe(400, 400 / 160)
    for _ in range(100):  # the slow samples' weight is down to 0.97 ** 100, 5 %
        cost.observe(400, 400 / 320)
    assert cost.coefficients(PROFILE_TOKENS_PER_S).seconds(400) == pytest.approx(400 / 320, rel=0.05)


def test_only_prompts_of_a_busy_line_are_sampled_from_the_previous_first_token() -> None:
    line = PrefillLine()
    line.join("a", 1.0, now=0.0, work_tokens=320)  # idle line: its time includes the path
    line.join("b", 1.0, now=0.1, work_tokens=320)
    line.join("c", 1.0, now=0.2, work_tokens=160)
    assert line.first_token("a", now=2.0) is None
    assert line.first_token("b", now=4.0) == PrefillSample(320, 2.0)
    assert line.first_token("c", now=5.0) == PrefillSample(160, 1.0)
    line.join("d", 1.0, now=9.0, work_tokens=320)  # the line is empty again
    assert line.first_token("d", now=10.5) is None


def _slow_engine_prediction(first_tokens: bool) -> float:
    """Predicted TTFT of a 400-token prompt on a worker after 8 prompts of 400 tokens, whose first
    tokens came (when ``first_tokens``) at half the profile's speed, one after another."""
    slow = replace(BIG, prefill_tokens_per_s=PROFILE_TOKENS_PER_S)
    limits = {"chat": ModelLimits("chat", RequestKind.LLM)}
    scheduler = build_scheduler(SchedulerConfig(), limits)
    scheduler.update_workers([view("cpu", slow, models=("chat",))])
    who = tenant(tier=Tier.PREMIUM)
    sent = [request(who, prefill=400, output=4) for _ in range(8)]
    for r in sent:
        scheduler.submit(r, now=0.0)
    assert len(scheduler.schedule(now=0.0).dispatches) == 8
    now = 0.0
    for r in sent:
        now += 2 * 400 / PROFILE_TOKENS_PER_S
        if first_tokens:
            scheduler.first_token(r.request_id, now)
        scheduler.complete(r.request_id, now, generated_tokens=4)
    scheduler.submit(request(who, now=now, prefill=400, output=4), now=now)
    assert len(scheduler.schedule(now=now).dispatches) == 1
    return scheduler.loads["cpu"].model("chat").line.until_s - now


def test_the_scheduler_predicts_the_next_prompt_at_the_speed_its_engine_showed() -> None:
    at_profile = _slow_engine_prediction(first_tokens=False)
    learned = _slow_engine_prediction(first_tokens=True)
    assert at_profile == pytest.approx(401 / PROFILE_TOKENS_PER_S, rel=0.01)
    assert learned == pytest.approx(2 * at_profile, rel=0.15)
