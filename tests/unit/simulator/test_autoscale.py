"""The autoscaling experiment on a tiny day: the rate curve and its time warp, the HPA baseline,
and simulated pools that start, drain and stop replicas on a policy's decisions."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from simulator.autoscale_day import DaySpec, PolicyResult, run_day
from simulator.autoscale_report import write
from simulator.day_mix import DriftingCurve, MixDrift, drift_lengths
from simulator.diurnal import RateCurve, warp
from simulator.workloads import TraceItem, load_azure, window


def test_rate_curve_swings_between_trough_and_peak_with_one_spike() -> None:
    curve = RateCurve(1.0, 10.0, day_s=1000.0, peak_at=0.5, spike_factor=3.0, spike_at=0.2, spike_s=50.0)
    assert curve.rps(0.0) == pytest.approx(1.0) and curve.rps(500.0) == pytest.approx(10.0)
    assert curve.rps(210.0) == pytest.approx(3 * curve.base_rps(210.0))
    assert curve.rps(260.0) == pytest.approx(curve.base_rps(260.0))
    with pytest.raises(ValueError):
        RateCurve(5.0, 1.0)


def test_warp_follows_the_curve_and_keeps_the_lengths() -> None:
    items = [TraceItem(float(i), 100 + i, 1 + i % 7) for i in range(200)]  # one request per second
    curve = RateCurve(2.0, 20.0, day_s=600.0, peak_at=0.5, spike_s=0.0)
    warped = warp(items, curve)
    expected = sum(curve.rps(t + 0.5) for t in range(600))
    assert abs(len(warped) - expected) < 0.02 * expected
    assert [w.prompt_tokens for w in warped[:200]] == [i.prompt_tokens for i in items]
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(warped))
    early = sum(1 for w in warped if w.arrival_s < 60)
    middle = sum(1 for w in warped if 270 <= w.arrival_s < 330)
    assert middle > 5 * early


def test_drifting_mix_keeps_the_work_on_the_curve_and_lowers_the_request_rate() -> None:
    work = RateCurve(2.0, 20.0, day_s=600.0, peak_at=0.5, spike_s=0.0)
    curve = DriftingCurve(work, MixDrift(0.0, 0.8, chat_at=0.25), work_ratio=3.0)
    assert curve.rps(150.0) == pytest.approx(work.rps(150.0))  # all chat at chat_at
    assert curve.rps(450.0) == pytest.approx(work.rps(450.0) / (1 + 0.8 * 2.0))  # 80 % long, 3x the work
    items = [TraceItem(float(i), 100, 10) for i in range(400)]
    mixed = drift_lengths(warp(items, curve), curve, [(3000, 300), (9000, 9000)], random.Random(1), 8192)
    late = [m for m in mixed if 400 <= m.arrival_s < 500]
    early = [m for m in mixed if 100 <= m.arrival_s < 200]
    assert sum(m.prompt_tokens == 3000 for m in late) > 0.6 * len(late)
    assert sum(m.prompt_tokens == 3000 for m in early) < 0.2 * len(early)
    assert all(m.prompt_tokens != 9000 for m in mixed)  # longer than the context: never drawn


@dataclass(frozen=True)
class Day:
    spec: DaySpec
    curve: DriftingCurve
    capacity: float
    results: list[PolicyResult]


@pytest.fixture(scope="module")
def tiny_day() -> Day:
    """Ten simulated minutes play the day, peak two replicas (about 900 requests per policy)."""
    items = window(load_azure("conv"), 0.0, 300.0)
    spec = DaySpec(day_s=600.0, peak_replicas=2, spike_s=60.0, spike_at=0.3, max_replicas=6,
                   scale_down_window_s=60.0, hpa_utilisations=(0.65,))
    return Day(spec, *run_day(items, spec, capacity=2.0, long_lengths=[(3000, 400), (2500, 300)]))


def test_every_policy_serves_every_request_once_and_bills_its_replicas(tiny_day: Day) -> None:
    spec, results = tiny_day.spec, tiny_day.results
    assert [r.policy for r in results] == ["static-peak", "static-mean", "hpa-rps@0.65", "shunter"]
    requests = {r.summary.overall.requests for r in results}
    assert len(requests) == 1 and requests.pop() > 300
    by = {r.policy: r for r in results}
    makespan = by["static-peak"].summary.makespan_s
    assert by["static-peak"].gpu_hours == pytest.approx(spec.peak_replicas * makespan / 3600, rel=1e-6)
    assert by["static-peak"].scale_ups == by["static-peak"].scale_downs == 0
    for name in ("hpa-rps@0.65", "shunter"):
        r = by[name]
        assert r.scale_ups >= 1 and r.scale_downs >= 1  # it followed the swing
        ready = [sum(p.ready.values()) for p in r.stats.timeline]
        assert min(ready) >= 1 and max(ready) > min(ready)
        assert r.gpu_hours > 0 and r.cost == pytest.approx(r.gpu_hours * 1.006, rel=1e-6)  # the a10's $/h


def test_scale_down_drains_without_cutting_requests(tiny_day: Day) -> None:
    for result in tiny_day.results:
        assert result.dispatched_not_completed == 0  # a draining replica finishes what it was given
    assert tiny_day.results[-1].reasons  # shunter's decisions, counted by reason


def test_report_writes_json_markdown_and_plot(tiny_day: Day, tmp_path: Path) -> None:
    head = write(tmp_path, tiny_day.spec, tiny_day.curve, tiny_day.capacity, tiny_day.results)
    assert {"shunter_gpu_hours_vs_static_peak", "shunter_attainment_minus_hpa_points"} <= set(head)
    assert (tmp_path / "autoscale.json").exists() and (tmp_path / "autoscale_replicas.png").stat().st_size > 1000
    table = (tmp_path / "autoscale.md").read_text()
    assert all(name in table for name in ("static-peak", "static-mean", "hpa-rps", "shunter"))
