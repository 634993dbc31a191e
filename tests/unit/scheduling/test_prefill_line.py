"""The engine's predicted prefill line, corrected by observed first tokens."""

from dataclasses import replace

import pytest

from scheduling.requests import RequestKind
from scheduling.scheduler import SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import ModelLimits, ModelLoad, observe_first_token, prefill_backlog_s
from tests.unit.scheduling.factories import BIG, LIMITS, request, tenant, view


def test_a_late_first_token_moves_the_rest_of_the_line_by_as_much() -> None:
    load = ModelLoad(requests=3, prefill_until_s=3.0)  # three prompts predicted done at 1, 2 and 3 s
    observe_first_token(load, predicted_s=1.0, shift_at_dispatch_s=0.0, now=1.5)
    assert load.prefill_until_s == pytest.approx(3.5)
    observe_first_token(load, predicted_s=2.0, shift_at_dispatch_s=0.0, now=2.5)  # on the corrected line
    assert load.prefill_until_s == pytest.approx(3.5)


def test_an_early_first_token_shortens_the_line_but_never_before_now() -> None:
    load = ModelLoad(requests=2, prefill_until_s=2.0)
    observe_first_token(load, predicted_s=1.0, shift_at_dispatch_s=0.0, now=0.6)
    assert load.prefill_until_s == pytest.approx(1.6)
    observe_first_token(load, predicted_s=5.0, shift_at_dispatch_s=0.0, now=0.7)
    assert load.prefill_until_s == pytest.approx(0.7)


def test_the_scheduler_corrects_a_workers_line_from_first_tokens() -> None:
    scheduler = build_scheduler(SchedulerConfig(), LIMITS)
    scheduler.update_workers([view("big", BIG)])
    who = tenant(tier=Tier.PREMIUM)
    first, second = request(who, prefill=400, output=10), request(who, prefill=400, output=10)
    for r in (first, second):
        scheduler.submit(r, now=0)
    assert len(scheduler.schedule(now=0).dispatches) == 2
    line = scheduler.loads["big"].model("chat")
    assert prefill_backlog_s(line, 1.0) == 0.0  # by the profile's speed both prompts were done at 0.2 s
    scheduler.first_token(first.request_id, now=1.0)  # the first one took 1 s: the second is still ahead
    assert prefill_backlog_s(line, 1.0) == pytest.approx(401 / BIG.prefill_tokens_per_s, rel=0.01)
    scheduler.first_token("unknown", now=1.0)  # ignored


def _dispatched_on_slow_worker(min_line_tokens: int) -> int:
    """Prompts of 100 tokens dispatched at once to a worker prefilling 320 tokens/s (0.31 s each)."""
    slow = replace(BIG, prefill_tokens_per_s=320)
    limits = {"chat": ModelLimits("chat", RequestKind.LLM, max_prefill_line_s=0.25,
                                  min_prefill_line_tokens=min_line_tokens)}
    scheduler = build_scheduler(SchedulerConfig(), limits)
    scheduler.update_workers([view("cpu", slow, models=("chat",))])
    for _ in range(8):
        scheduler.submit(request(tenant(tier=Tier.PREMIUM), prefill=100, output=10), now=0)
    return len(scheduler.schedule(now=0).dispatches)


def test_a_slow_engines_line_holds_the_minimum_of_prompt_tokens() -> None:
    # 0.25 s is less than one 100-token prompt at 320 tokens/s: the engine would get them one by one.
    assert _dispatched_on_slow_worker(0) == 1
    # 375 tokens (1.17 s) of line: a prompt is dispatched while the line ahead is shorter than that.
    assert _dispatched_on_slow_worker(375) == 4


def test_the_minimum_line_does_not_bind_a_fast_engine() -> None:
    limits = ModelLimits("chat", RequestKind.LLM, max_prefill_line_s=0.25, min_prefill_line_tokens=375)
    assert limits.prefill_line_bound_s(4000) == 0.25
    assert limits.prefill_line_bound_s(320) == pytest.approx(375 / 320)
    assert replace(limits, max_prefill_line_s=None).prefill_line_bound_s(320) is None
