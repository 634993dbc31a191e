"""The event heap: time order, then priority, then scheduling order; cancelled events never run."""

from __future__ import annotations

from simulator.engine import ARRIVAL, STEP, WAKE, EventLoop


def test_events_run_by_time_then_priority_then_insertion_order() -> None:
    loop, seen = EventLoop(), []
    loop.at(2.0, STEP, lambda: seen.append("late"))
    loop.at(1.0, WAKE, lambda: seen.append("wake"))
    loop.at(1.0, ARRIVAL, lambda: seen.append("arrival-1"))
    loop.at(1.0, ARRIVAL, lambda: seen.append("arrival-2"))
    loop.at(1.0, STEP, lambda: seen.append("step"))
    loop.run()
    assert seen == ["step", "arrival-1", "arrival-2", "wake", "late"]
    assert loop.now == 2.0 and loop.processed == 5


def test_cancelled_events_do_not_run_and_stop_ends_the_run() -> None:
    loop, seen = EventLoop(), []
    event = loop.at(1.0, STEP, lambda: seen.append("cancelled"))
    event.cancel()
    loop.at(2.0, STEP, loop.stop)
    loop.at(3.0, STEP, lambda: seen.append("after stop"))
    loop.run()
    assert seen == [] and loop.now == 2.0


def test_an_event_is_never_scheduled_in_the_past() -> None:
    loop = EventLoop()
    times: list[float] = []
    loop.at(5.0, STEP, lambda: loop.at(1.0, STEP, lambda: times.append(loop.now)))
    loop.run()
    assert times == [5.0]
