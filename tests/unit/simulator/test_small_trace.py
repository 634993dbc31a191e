"""The small CPU trace: the first requests, lengths divided and clipped, arrivals scaled to a rate."""

from __future__ import annotations

import pytest

from simulator.small_trace import Shrink, small_trace
from simulator.workloads import TraceItem, mean_rate

ITEMS = [TraceItem(100.0 + 2.0 * i, 60 * (i + 1), 10 * (i + 1)) for i in range(10)]


def test_lengths_are_divided_and_clipped() -> None:
    shrink = Shrink(6.0, 16, 40)
    assert [shrink.apply(t) for t in (6, 60, 120, 600)] == [16, 16, 20, 40]


def test_the_first_requests_keep_their_pattern_at_the_chosen_rate() -> None:
    trace = small_trace(list(reversed(ITEMS)), 5, Shrink(6.0, 16, 40), Shrink(4.0, 4, 96), rate_per_s=1.0)
    assert [t.prompt_tokens for t in trace] == [16, 20, 30, 40, 40]
    assert [t.output_tokens for t in trace] == [4, 5, 8, 10, 12]
    assert trace[0].arrival_s == 0.0
    assert mean_rate(trace) == pytest.approx(1.0)
    assert [t.arrival_s for t in trace] == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        Shrink(0.0, 1, 2)
    with pytest.raises(ValueError):
        small_trace(ITEMS[:1], 1, Shrink(1.0, 1, 2), Shrink(1.0, 1, 2), 1.0)
