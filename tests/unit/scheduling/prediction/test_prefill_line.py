"""The engine's predicted prefill line, corrected by observed and overdue first tokens."""

from dataclasses import replace

import pytest

from scheduling.prediction.latency import prefill_backlog_s
from scheduling.prediction.prefill_line import PrefillLine
from scheduling.requests import RequestKind
from scheduling.scheduler import SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import ModelLimits
from tests.unit.scheduling.factories import BIG, LIMITS, request, tenant, view


def _line_of_three() -> PrefillLine:
    """Three prompts of 1 s each dispatched at 0: first tokens predicted at 1, 2 and 3 s."""
    line = PrefillLine()
    assert [line.join(name, 1.0, now=0.0) for name in ("a", "b", "c")] == [1.0, 2.0, 3.0]
    return line


def test_a_late_first_token_moves_the_rest_of_the_line_by_as_much() -> None:
    line = _line_of_three()
    line.first_token("a", now=1.5)
    assert line.until_s == pytest.approx(3.5)
    line.first_token("b", now=2.5)  # on time on the corrected line
    assert line.until_s == pytest.approx(3.5)
    line.first_token("b", now=9.0)  # seen already: ignored
    assert line.until_s == pytest.approx(3.5)


def test_an_early_first_token_shortens_the_line_but_never_before_now() -> None:
    line = _line_of_three()
    line.first_token("a", now=0.6)
    assert line.until_s == pytest.approx(2.6)
    line.first_token("c", now=0.7)  # predicted at 2.6 on the corrected line
    assert line.until_s == pytest.approx(0.7)


def test_an_overdue_first_token_makes_the_line_late_before_it_comes() -> None:
    line = _line_of_three()
    assert line.backlog_s(0.5) == pytest.approx(2.5)
    assert line.backlog_s(1.0) == pytest.approx(2.0)  # "a" is due now
    # No first token for "a" at 4 s: "b" and "c" cannot have started, 2 s of line are still ahead.
    assert line.backlog_s(4.0) == pytest.approx(2.0)
    assert line.join("d", 1.0, now=4.0) == pytest.approx(7.0)  # behind the late line, not at 5 s


def test_a_first_token_after_its_lateness_was_counted_corrects_only_the_rest() -> None:
    line = _line_of_three()
    line.join("d", 1.0, now=4.0)  # counted "a" 3 s late: d predicted at 7 s
    line.first_token("a", now=4.5)  # 0.5 s later than that
    assert line.until_s == pytest.approx(7.5)
    assert line.backlog_s(4.5) == pytest.approx(3.0)  # b, c, d: 1 s each


def test_a_request_that_ends_without_a_first_token_is_no_longer_awaited() -> None:
    line = _line_of_three()
    line.leave("a", now=0.2, engine_idle=False)  # cancelled before its first token
    assert line.overdue_s(1.5) == 0.0  # b is due at 2 s
    assert line.overdue_s(2.5) == pytest.approx(0.5)
    line.leave("b", now=2.5, engine_idle=False)
    line.leave("c", now=2.5, engine_idle=True)
    assert line.backlog_s(2.5) == 0.0 and line.overdue_s(10.0) == 0.0


def test_the_scheduler_corrects_a_workers_line_from_first_tokens() -> None:
    scheduler = build_scheduler(SchedulerConfig(), LIMITS)
    scheduler.update_workers([view("big", BIG)])
    who = tenant(tier=Tier.PREMIUM)
    first, second = request(who, prefill=400, output=10), request(who, prefill=400, output=10)
    for r in (first, second):
        scheduler.submit(r, now=0)
    assert len(scheduler.schedule(now=0).dispatches) == 2
    line = scheduler.loads["big"].model("chat")
    second_prompt_s = 401 / BIG.prefill_tokens_per_s
    assert prefill_backlog_s(line, 0.0) == pytest.approx(2 * second_prompt_s, rel=0.01)
    # By the profile's speed both prompts were done at 0.2 s; at 1 s no first token has come, so
    # the second prompt is still ahead, at least.
    assert prefill_backlog_s(line, 1.0) == pytest.approx(second_prompt_s, rel=0.01)
    scheduler.first_token(first.request_id, now=1.2)  # the first one took 1.2 s
    assert prefill_backlog_s(line, 1.2) == pytest.approx(second_prompt_s, rel=0.01)
    scheduler.first_token(second.request_id, now=1.25)
    assert prefill_backlog_s(line, 1.25) == 0.0
    scheduler.first_token("unknown", now=1.3)  # ignored


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


def test_a_prompt_sent_again_is_awaited_at_its_new_prediction_only() -> None:
    line = PrefillLine()
    line.join("b", 1.0, now=0.0)
    line.join("a", 1.0, now=0.0)  # due at 2 s
    line.leave("a", now=0.5, engine_idle=False)
    line.join("a", 1.0, now=0.5)  # the same id dispatched again: due at 3 s
    line.first_token("b", now=1.0)
    assert line.overdue_s(2.5) == 0.0 and line.overdue_s(3.5) == pytest.approx(0.5)
