"""The serving path outside the engine: every report of an LLM worker reaches the driver a fixed
latency later, in order, without holding the engine; no path means direct reports."""

from __future__ import annotations

import pytest

from scheduling.tenants import Tenant, Tier
from simulator.engine import ARRIVAL, EventLoop
from simulator.llm_worker import LlmWorker, Sequence
from simulator.perf.fitted import FittedPerf
from simulator.perf.protocol import EngineLimits
from simulator.perf.step_fit import StepLaw
from simulator.replay_sim import ReplayRequest, simulate_replay
from simulator.served_path import NO_PATH, DelayedReports, ServedPath
from tests.unit.simulator.helpers import one
from tests.unit.simulator.test_replay_sim import SETUP

PERF = FittedPerf(EngineLimits(16, 63, 63, 8192, short_prefill_first=True), StepLaw(0.004, 0.003, 0.006, 0.004))
TENANT = Tenant("demo-standard", Tier.STANDARD, 2.0)


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []

    def first_token(self, request_id: str, now: float) -> None:
        self.events.append(("first", request_id, now))

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        self.events.append(("finished", request_id, now))

    def dropped(self, request_id: str, now: float) -> None:
        self.events.append(("dropped", request_id, now))


def _run(path: ServedPath) -> tuple[Log, LlmWorker]:
    loop, log = EventLoop(), Log()
    worker = LlmWorker("cpu", PERF, loop, path.wrap(log, loop))
    for request_id, arrival_s, prompt, output in [("a", 0.0, 100, 6), ("b", 0.05, 30, 3)]:
        item = one(request_id, TENANT, arrival_s, prompt, output)
        sequence = Sequence(item.request, item.output_tokens)
        loop.at(arrival_s, ARRIVAL, lambda s=sequence: worker.enqueue(s))  # type: ignore[misc]
    loop.run()
    return log, worker


def test_every_report_arrives_the_path_latency_later_in_the_same_order() -> None:
    direct, direct_worker = _run(NO_PATH)
    delayed, delayed_worker = _run(ServedPath(0.025))
    assert [(kind, rid) for kind, rid, _ in delayed.events] == [(kind, rid) for kind, rid, _ in direct.events]
    for (_, _, late), (_, _, now) in zip(delayed.events, direct.events, strict=True):
        assert late == pytest.approx(now + 0.025)
    assert delayed_worker.busy_s == direct_worker.busy_s  # the path holds no engine time


def test_no_path_reports_directly() -> None:
    loop, log = EventLoop(), Log()
    assert NO_PATH.wrap(log, loop) is log
    assert isinstance(ServedPath(0.01).wrap(log, loop), DelayedReports)


def test_a_lone_replayed_request_waits_for_its_prefill_and_the_path() -> None:
    request = [ReplayRequest("r1", TENANT, 1.0, 130, 16, 8)]
    records = simulate_replay(request, SETUP, PERF, ServedPath(0.02))
    assert records[0].outcome == "completed"
    assert records[0].ttft_s == pytest.approx(PERF.prefill_s(130) + 0.02)
    assert simulate_replay(request, SETUP, PERF)[0].ttft_s == pytest.approx(PERF.prefill_s(130))


def test_the_profile_gives_the_path_and_none_without_it() -> None:
    assert ServedPath.from_profile({"served": {"decode_seq_s": 0.002, "path_s": 0.004}}) == ServedPath(0.004)
    assert ServedPath.from_profile({"served": {"decode_seq_s": 0.002}}) == NO_PATH
    assert ServedPath.from_profile({}) == NO_PATH
    with pytest.raises(ValueError):
        ServedPath(-0.001)


def test_the_measured_end_path_splits_the_path_into_its_request_and_response_sides() -> None:
    served = {"served": {"path_s": 0.012, "end_path_s": 0.001}}
    path = ServedPath.from_profile(served)
    assert (path.response_s, path.request_s) == (0.001, pytest.approx(0.011))
    # an end path longer than the whole path puts all of it after the engine
    assert ServedPath.from_profile({"served": {"path_s": 0.004, "end_path_s": 0.009}}) == ServedPath(0.004, 0.0)
    assert ServedPath.from_profile({"served": {"path_s": 0.004, "end_path_s": None}}) == ServedPath(0.004)
    with pytest.raises(ValueError):
        ServedPath(0.0, -0.001)


def test_an_idle_first_token_costs_the_whole_path_however_it_is_split() -> None:
    request = [ReplayRequest("r1", TENANT, 1.0, 130, 16, 8)]
    split = simulate_replay(request, SETUP, PERF, ServedPath(response_s=0.002, request_s=0.018))[0]
    assert split.ttft_s == pytest.approx(PERF.prefill_s(130) + 0.02)
    after = simulate_replay(request, SETUP, PERF, ServedPath(0.02))[0]
    # alone on the engine, the end too comes the whole path after the engine-alone timeline
    assert split.finish_s == pytest.approx(after.finish_s)  # type: ignore[operator]


def test_the_request_side_reaches_the_engine_later_without_holding_it() -> None:
    loop, log = EventLoop(), Log()
    path = ServedPath(0.0, 0.05)
    worker = LlmWorker("cpu", PERF, loop, path.wrap(log, loop))
    item = one("a", TENANT, 0.0, 30, 3)
    loop.at(0.0, ARRIVAL, lambda: path.enqueue(worker, Sequence(item.request, item.output_tokens), loop))
    loop.run()
    first = next(at for kind, _, at in log.events if kind == "first")
    assert first == pytest.approx(0.05 + PERF.prefill_s(30))
