"""The engine's predicted prefill line, corrected by observed first tokens."""

import pytest

from scheduling.scheduler import SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import ModelLoad, observe_first_token, prefill_backlog_s
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
