"""A day of traffic from a real trace: the trace's requests (lengths and arrival pattern) time-warped
onto a rate curve: a diurnal swing plus one unannounced spike.

Time warp: the trace's arrivals are read in "operational time" ``u_i = arrival_i x mean_rate``
(about one unit per request, keeping the trace's own bursts and lulls), repeated end to end as
often as needed; request ``i`` then arrives at ``t_i = L^-1(u_i)`` where ``L(t)`` is the integral
of the rate curve. So the rate follows the curve, and each request keeps its prompt and output
lengths and its place in the trace's burst pattern (the Azure conversation trace: 19,366 requests
in 58 minutes).

The day may be compressed: ``day_s`` seconds of simulated time play the 24 hours of the curve
(the swing is slow, minutes of it change little), while the spike keeps its real duration (a flash
crowd is fast; the controller's period, windows and cold starts are not compressed either).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from simulator.workloads import TraceItem

DAY_S = 86_400.0


class Curve(Protocol):
    """What ``cumulative`` and ``warp`` read of a rate curve."""

    @property
    def day_s(self) -> float: ...

    @property
    def spike_start_s(self) -> float: ...

    @property
    def spike_end_s(self) -> float: ...

    def rps(self, t_s: float) -> float: ...


@dataclass(frozen=True)
class RateCurve:
    """Requests per second over ``day_s`` simulated seconds: a cosine from ``trough_rps`` (at the
    start and end of the day) to ``peak_rps`` (at ``peak_at`` of the day), times ``spike_factor``
    during ``[spike_at x day_s, + spike_s)``."""

    trough_rps: float
    peak_rps: float
    day_s: float = DAY_S
    peak_at: float = 0.55  # share of the day: early afternoon
    spike_factor: float = 3.0
    spike_at: float = 0.35  # share of the day: mid-morning, on the ramp
    spike_s: float = 900.0

    def __post_init__(self) -> None:
        if not 0 < self.trough_rps <= self.peak_rps or self.day_s <= 0 or self.spike_s < 0:
            raise ValueError("need 0 < trough_rps <= peak_rps, day_s > 0, spike_s >= 0")
        if not 0 < self.peak_at < 1 or not 0 <= self.spike_at < 1 or self.spike_factor <= 0:
            raise ValueError("peak_at in (0, 1), spike_at in [0, 1), spike_factor > 0")

    @property
    def spike_start_s(self) -> float:
        return self.spike_at * self.day_s

    @property
    def spike_end_s(self) -> float:
        return self.spike_start_s + self.spike_s

    def base_rps(self, t_s: float) -> float:
        """The diurnal rate: a raised cosine, trough at 0 and ``day_s``, peak at ``peak_at``."""
        x = t_s / self.day_s
        phase = x / self.peak_at if x <= self.peak_at else 1.0 + (x - self.peak_at) / (1.0 - self.peak_at)
        return self.trough_rps + (self.peak_rps - self.trough_rps) * (1.0 - math.cos(math.pi * phase)) / 2.0

    def rps(self, t_s: float) -> float:
        spiking = self.spike_start_s <= t_s < self.spike_end_s
        return self.base_rps(t_s) * (self.spike_factor if spiking else 1.0)


def cumulative(curve: Curve, step_s: float = 10.0) -> tuple[list[float], list[float]]:
    """``(times, L(times))``: the expected arrivals by each time, by the trapezoid rule."""
    times, totals = [0.0], [0.0]
    t = 0.0
    while t < curve.day_s:
        nxt = min(curve.day_s, t + step_s)
        # split at the spike's edges so the step function is integrated exactly
        edges = sorted({t, nxt, *(e for e in (curve.spike_start_s, curve.spike_end_s) if t < e < nxt)})
        for a, b in itertools.pairwise(edges):
            mid_rate = (curve.rps(a) + curve.rps(b - 1e-9)) / 2.0
            times.append(b)
            totals.append(totals[-1] + mid_rate * (b - a))
        t = nxt
    return times, totals


def warp(items: Sequence[TraceItem], curve: Curve, step_s: float = 10.0) -> list[TraceItem]:
    """The trace's requests time-warped onto ``curve`` (module docstring), repeated as needed."""
    if len(items) < 2:
        raise ValueError("the trace needs at least two requests")
    span_s = items[-1].arrival_s - items[0].arrival_s
    rate = (len(items) - 1) / span_s
    units = [(i.arrival_s - items[0].arrival_s) * rate for i in items]
    lap = units[-1] + 1.0  # one pass of the trace in operational time
    times, totals = cumulative(curve, step_s)
    out: list[TraceItem] = []
    offset = 0.0
    while True:
        for item, u in zip(items, units, strict=True):
            target = offset + u
            if target >= totals[-1]:
                return out
            k = bisect.bisect_right(totals, target)
            t0, t1, l0, l1 = times[k - 1], times[k], totals[k - 1], totals[k]
            out.append(replace(item, arrival_s=t0 + (t1 - t0) * (target - l0) / (l1 - l0) if l1 > l0 else t0))
        offset += lap
