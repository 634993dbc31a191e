"""The canary verdict and the sliding window of gateway counters (pure, no servers)."""

from __future__ import annotations

import pytest

from control.canary_analysis import (
    MetricsHistory,
    Thresholds,
    VersionCounters,
    VersionWindow,
    judge,
    p99,
)

BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, float("inf"))


def histogram(latencies_s: list[float]) -> tuple[tuple[float, float], ...]:
    return tuple((bound, float(sum(1 for x in latencies_s if x <= bound))) for bound in BUCKETS)


def test_a_canary_failing_more_than_the_allowed_delta_is_rolled_back() -> None:
    verdict = judge(VersionWindow(1, 200, 0, 0.05), VersionWindow(2, 40, 12, 0.05), Thresholds())
    assert verdict.decision == "rollback"
    assert "error rate" in verdict.reason
    assert verdict.as_dict()["canary"]["error_rate"] == pytest.approx(0.3)


def test_a_canary_much_slower_at_p99_is_rolled_back_but_a_few_ms_apart_is_not() -> None:
    slow = judge(VersionWindow(1, 200, 0, 0.1), VersionWindow(2, 40, 0, 0.5), Thresholds())
    assert slow.decision == "rollback" and "p99" in slow.reason
    close = judge(VersionWindow(1, 200, 0, 0.004), VersionWindow(2, 40, 0, 0.012), Thresholds())
    assert close.decision == "healthy"


def test_too_few_requests_give_no_verdict() -> None:
    verdict = judge(VersionWindow(1, 200, 0, 0.05), VersionWindow(2, 5, 5, 0.05), Thresholds(min_requests=20))
    assert verdict.decision == "insufficient_data"


def test_p99_interpolates_inside_the_bucket() -> None:
    assert p99(histogram([0.015] * 100)) == pytest.approx(0.01 + 0.99 * 0.01)
    assert p99(()) is None


def test_the_window_is_the_difference_to_the_newest_snapshot_older_than_window_s() -> None:
    history = MetricsHistory(window_s=10.0)
    key = ("embed", "2")
    history.add(0.0, {key: VersionCounters(100, 50, histogram([0.015] * 150))})
    history.add(5.0, {key: VersionCounters(110, 50, histogram([0.015] * 160))})
    history.add(12.0, {key: VersionCounters(130, 52, histogram([0.015] * 180 + [0.3] * 2))})
    window = history.window("embed", 2)
    assert (window.requests, window.errors) == (32, 2)  # base t=0: t=5 is only 7 s old
    history.add(16.0, {key: VersionCounters(150, 52, histogram([0.015] * 200 + [0.3] * 2))})
    assert history.window("embed", 2).requests == 42    # t=5 is now 11 s old: it is the base


def test_thresholds_come_from_the_rollout_record() -> None:
    thresholds = Thresholds.from_dict({"min_requests": 5.0, "max_error_rate_delta": 0.1, "window_s": 30.0})
    assert thresholds.min_requests == 5 and thresholds.max_error_rate_delta == 0.1
