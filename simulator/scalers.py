"""The replica policies the autoscaling experiment compares: fixed counts (static peak, static
mean), a request-rate HPA (the Kubernetes algorithm on requests per second per replica, the
"CPU-style" autoscaling), and ``shunter`` (the capacity policy of ``scheduling.autoscaling``, the
same function the control service calls)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduling.autoscaling import AutoscalingConfig, ControllerState, decide
from simulator.observe import Observation


@dataclass
class StaticScaler:
    """The same replicas all day."""

    counts: Mapping[str, int]

    def desired(self, observation: Observation, now_s: float) -> dict[str, int]:
        return dict(self.counts)


@dataclass
class HpaScaler:
    """Kubernetes' HPA on one pool with the metric "requests per second per replica":
    ``desired = ceil(current x (rps / current) / target)``, no change within ``tolerance``,
    scale-up at most ``max(2 x current, current + 4)`` per period, scale-down to the highest
    recommendation of the last ``scale_down_window_s`` (HPA defaults: 10 %, 300 s)."""

    pool: str
    target_rps_per_replica: float
    min_replicas: int
    max_replicas: int
    tolerance: float = 0.1
    scale_down_window_s: float = 300.0
    _current: int = 0
    _history: deque[tuple[float, int]] = field(default_factory=deque)

    def desired(self, observation: Observation, now_s: float) -> dict[str, int]:
        signals = observation.snapshot.pools
        current = sum(p.ready + p.starting for k, p in signals.items() if k.pool == self.pool)
        ratio = observation.arrivals_rps / (max(current, 1) * self.target_rps_per_replica)
        if current and abs(ratio - 1.0) <= self.tolerance:
            recommended = current
        else:
            recommended = math.ceil(observation.arrivals_rps / self.target_rps_per_replica - 1e-9)
        recommended = max(self.min_replicas, min(self.max_replicas, recommended,
                                                 max(2 * current, current + 4)))
        self._history.append((now_s, recommended))
        while self._history and now_s - self._history[0][0] >= self.scale_down_window_s:
            self._history.popleft()
        if recommended < current:
            recommended = min(current, max(n for _, n in self._history))
        return {self.pool: recommended}


@dataclass
class ShunterScaler:
    """``scheduling.autoscaling.decide`` on the observed snapshot; its state kept between ticks."""

    config: AutoscalingConfig
    state: ControllerState = field(default_factory=ControllerState)
    reasons: dict[str, int] = field(default_factory=dict)

    def desired(self, observation: Observation, now_s: float) -> dict[str, int]:
        decisions, self.state = decide(observation.snapshot, self.config, self.state, now_s)
        out: dict[str, int] = {}
        for d in decisions:
            out[d.key.pool] = out.get(d.key.pool, 0) + d.desired
            if d.desired != d.current:
                self.reasons[d.reason.value] = self.reasons.get(d.reason.value, 0) + 1
        return out
