"""Simulated pools that a replica policy sizes while the day runs: the driver of ``driver.py``
with worker slots that start (ready after the GPU's cold start: engine boot plus weight load),
take work, drain (no new work; in-flight work finishes) and stop, on the policy's decisions.

Every ``period_s`` the simulation measures what a gateway measures (``observe.Observer``) and asks
the policy for the replicas of each pool; it bills every replica from its start to its stop
(starting and draining replicas cost what ready ones do) and records a timeline for the plots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.outcomes import Outcome
from scheduling.requests import Request
from scheduling.slo import Slo
from scheduling.workers import WorkerView
from simulator.driver import SchedulerLike, SimResult, Simulation, WorkerSpec
from simulator.engine import ARRIVAL
from simulator.llm_worker import LlmWorker
from simulator.observe import Observation, Observer
from simulator.records import SimRequest

STOPPED, STARTING, READY, DRAINING = "stopped", "starting", "ready", "draining"


class ReplicaPolicy(Protocol):
    """Replicas wanted per pool, from what was observed over the last period."""

    def desired(self, observation: Observation, now_s: float) -> dict[str, int]: ...


@dataclass(frozen=True)
class TimelinePoint:
    """One controller tick: demand over the last period and replicas per pool."""

    t_s: float
    arrivals_rps: float
    demand_tokens_per_s: float
    ready: dict[str, int]
    starting: dict[str, int]
    desired: dict[str, int]


@dataclass
class ScaleStats:
    """What the scaling cost and did: replica-seconds and dollars per pool, scale events, and the
    requests that waited for a replica that was still cold when they arrived."""

    replica_s: dict[str, float] = field(default_factory=dict)
    cost: float = 0.0
    scale_ups: int = 0
    scale_downs: int = 0
    timeline: list[TimelinePoint] = field(default_factory=list)
    ready_at: dict[str, list[float]] = field(default_factory=dict)  # worker id -> times it became ready


class ScaledSimulation(Simulation):
    """``Simulation`` over worker slots whose count a ``ReplicaPolicy`` sets every ``period_s``."""

    def __init__(self, scheduler: SchedulerLike, slots: Sequence[WorkerSpec], arrivals: Sequence[SimRequest],
                 slos: Callable[[Request], Slo], policy: ReplicaPolicy, initial: Mapping[str, int],
                 observer: Observer, period_s: float, cold_start_s: Mapping[str, float],
                 cost_per_hour: Mapping[str, float]) -> None:
        super().__init__(scheduler, slots, arrivals, slos)
        self.policy, self.observer, self.period_s = policy, observer, period_s
        self.cold_start_s, self.cost_per_hour = dict(cold_start_s), dict(cost_per_hour)
        self.state = {worker_id: STOPPED for worker_id in self.workers}
        self._since: dict[str, float] = {}  # billed since
        self._ready_event: dict[str, object] = {}
        self.stats = ScaleStats(replica_s={p: 0.0 for p in self._pools()})
        for pool, count in initial.items():
            for worker_id in self._slots(pool)[:count]:
                self._start(worker_id, ready_now=True)

    # -- hooks into the driver -----------------------------------------------------------------
    def _views(self) -> list[WorkerView]:
        return [w.view if self.state[i] == READY else _takes_no_work(w.view) for i, w in self.workers.items()]

    def run(self, progress: Callable[[float], None] | None = None) -> SimResult:
        self.loop.at(self.period_s, ARRIVAL, self._tick)
        result = super().run(progress)
        for worker_id in list(self._since):
            self._bill(worker_id)
        return result

    def _arrive(self, item: SimRequest) -> None:
        self.observer.arrived(item, self.loop.now)
        super()._arrive(item)

    def first_token(self, request_id: str, now: float) -> None:
        super().first_token(request_id, now)
        self.observer.first_token(self.records[request_id], now)

    def _end(self, request_id: str, outcome: Outcome, reason: str = "") -> None:
        super()._end(request_id, outcome, reason)
        self.observer.ended(self.records[request_id], self.loop.now)

    # -- the controller ------------------------------------------------------------------------
    def _tick(self) -> None:
        now = self.loop.now
        self._stop_drained()
        counts = {p: self._counts(p) for p in self._pools()}
        observation = self.observer.observe(now, self.pending.values(), counts, self._engines_by_pool())
        desired = self.policy.desired(observation, now)
        for pool, want in desired.items():
            self._resize(pool, want)
        self.stats.timeline.append(TimelinePoint(
            now, observation.arrivals_rps, observation.demand_tokens_per_s,
            {p: c[READY] for p, c in counts.items()}, {p: c[STARTING] for p, c in counts.items()}, dict(desired)))
        self.loop.at(now + self.period_s, ARRIVAL, self._tick)

    def _resize(self, pool: str, want: int) -> None:
        slots = self._slots(pool)
        live = [w for w in slots if self.state[w] in (STARTING, READY)]
        want = max(0, min(want, len(slots)))
        if want > len(live):
            self.stats.scale_ups += 1
            revived = [w for w in slots if self.state[w] == DRAINING][: want - len(live)]
            for worker_id in revived:  # a draining replica is still warm: it takes work again
                self.state[worker_id] = READY
            stopped = [w for w in slots if self.state[w] == STOPPED][: want - len(live) - len(revived)]
            for worker_id in stopped:
                self._start(worker_id, ready_now=False)
            if revived:
                self._views_changed()
        elif want < len(live):
            self.stats.scale_downs += 1
            by_cost = sorted(live, key=lambda w: (self.state[w] == READY, self._busy(w), w), reverse=False)
            for worker_id in by_cost[: len(live) - want]:
                self._drain(worker_id)
            self._views_changed()

    def _start(self, worker_id: str, ready_now: bool) -> None:
        self._since[worker_id] = self.loop.now
        if ready_now:
            self.state[worker_id] = READY
            self.stats.ready_at.setdefault(worker_id, []).append(self.loop.now)
            return
        self.state[worker_id] = STARTING
        pool = self.workers[worker_id].view.pool
        self._ready_event[worker_id] = self.loop.at(self.loop.now + self.cold_start_s[pool], ARRIVAL,
                                                    lambda: self._ready(worker_id))

    def _ready(self, worker_id: str) -> None:
        if self.state[worker_id] != STARTING:
            return
        self.state[worker_id] = READY
        self.stats.ready_at.setdefault(worker_id, []).append(self.loop.now)
        self._views_changed()

    def _drain(self, worker_id: str) -> None:
        if self.state[worker_id] == STARTING:  # never took work: stop at once
            self.state[worker_id] = STOPPED
            self._bill(worker_id)
            return
        self.state[worker_id] = DRAINING

    def _stop_drained(self) -> None:
        for worker_id, state in self.state.items():
            if state == DRAINING and not self._busy(worker_id):
                self.state[worker_id] = STOPPED
                self._bill(worker_id)

    def _bill(self, worker_id: str) -> None:
        start = self._since.pop(worker_id)
        pool = self.workers[worker_id].view.pool
        seconds = self.loop.now - start
        self.stats.replica_s[pool] = self.stats.replica_s.get(pool, 0.0) + seconds
        self.stats.cost += seconds / 3600.0 * self.cost_per_hour[pool]

    def _views_changed(self) -> None:
        self.scheduler.update_workers(self._views())
        self._pass()

    # -- helpers -------------------------------------------------------------------------------
    def _pools(self) -> list[str]:
        return sorted({w.view.pool for w in self.workers.values()})

    def _slots(self, pool: str) -> list[str]:
        return sorted(i for i, w in self.workers.items() if w.view.pool == pool)

    def _counts(self, pool: str) -> dict[str, int]:
        counts = {STOPPED: 0, STARTING: 0, READY: 0, DRAINING: 0}
        for worker_id in self._slots(pool):
            counts[self.state[worker_id]] += 1
        return counts

    def _busy(self, worker_id: str) -> int:
        engine = self.workers[worker_id].engine
        if isinstance(engine, LlmWorker):
            return len(engine.running) + len(engine.waiting)
        return 0

    def _engines_by_pool(self) -> dict[str, list[LlmWorker]]:
        out: dict[str, list[LlmWorker]] = {}
        for worker_id, worker in self.workers.items():
            if self.state[worker_id] == READY and isinstance(worker.engine, LlmWorker):
                out.setdefault(worker.view.pool, []).append(worker.engine)
        return out


def _takes_no_work(view: WorkerView) -> WorkerView:
    """The view of a starting, draining or stopped replica: no model ready, so no new work."""
    return WorkerView(view.worker_id, view.pool, view.region, view.profile, {}, view.healthy,
                      view.kv_total_tokens, view.kv_used_tokens)
