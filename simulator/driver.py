"""The simulator's event loop around a scheduler: it calls ``submit``/``schedule``/``complete``
exactly as the gateway's dispatcher does (a scheduling pass on every admission and every
completion, and a wake at ``next_deadline_s()``), and hands each dispatch to a worker model.

Contract: every request ends in exactly one outcome (``completed``, ``rejected``, ``expired``,
``cancelled``, ``failed``); the same arrivals, pool and seed give the same records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.outcomes import Outcome, Rejected, SchedulePlan
from scheduling.requests import Request
from scheduling.slo import Slo
from scheduling.workers import WorkerView
from simulator.batched_worker import BatchedWorker
from simulator.engine import ARRIVAL, WAKE, Event, EventLoop
from simulator.llm_worker import LlmWorker, WorkerListener
from simulator.llm_worker import Sequence as EngineSequence
from simulator.perf.gpu import BatchedPerf
from simulator.perf.protocol import LlmPerfModel
from simulator.records import RequestRecord, SimRequest
from simulator.served_path import NO_PATH, ServedPath
from simulator.tracking import ServiceTracker


class SchedulerLike(Protocol):
    """The core's driver-facing verbs (``scheduling.scheduler.Scheduler`` has them)."""

    def update_workers(self, views: Iterable[WorkerView]) -> None: ...

    def submit(self, request: Request, now: float) -> Rejected | object: ...

    def schedule(self, now: float) -> SchedulePlan: ...

    def first_token(self, request_id: str, now: float) -> None: ...

    def complete(self, request_id: str, now: float, generated_tokens: int = 0) -> object: ...

    def next_deadline_s(self) -> float | None: ...


@dataclass(frozen=True)
class WorkerSpec:
    """One worker to simulate: its timing model, the view the scheduler is given, when it is ready
    (after a cold start), whether its engine times queued requests out lazily (Triton) and, for an
    LLM worker, the serving path its requests and reports cross (``served_path``; none by default;
    a batched worker's reports do not cross it)."""

    perf: LlmPerfModel | BatchedPerf
    view: WorkerView
    ready_s: float = 0.0
    lazy_timeouts: bool = False
    max_batch_rows: int = 1  # batched models: rows per batch (Triton's max_batch_size)
    path: ServedPath = NO_PATH

    def build(self, loop: EventLoop, listener: WorkerListener) -> LlmWorker | BatchedWorker:
        worker_id = self.view.worker_id
        if isinstance(self.perf, BatchedPerf):
            return BatchedWorker(worker_id, self.perf, loop, listener, self.max_batch_rows, self.lazy_timeouts)
        return LlmWorker(worker_id, self.perf, loop, self.path.wrap(listener, loop), self.lazy_timeouts)


@dataclass
class SimWorker:
    spec: WorkerSpec
    engine: LlmWorker | BatchedWorker

    @property
    def view(self) -> WorkerView:
        return self.spec.view

    @property
    def ready_s(self) -> float:
        return self.spec.ready_s


@dataclass
class SimResult:
    records: list[RequestRecord]
    workers: list[SimWorker]
    makespan_s: float
    events: int
    fairness: ServiceTracker = field(repr=False)


class Simulation:
    def __init__(self, scheduler: SchedulerLike, workers: Sequence[WorkerSpec], arrivals: Sequence[SimRequest],
                 slos: Callable[[Request], Slo], fairness_window_s: float = 10.0) -> None:
        self.loop = EventLoop()
        self.scheduler = scheduler
        self.workers = {spec.view.worker_id: SimWorker(spec, spec.build(self.loop, self)) for spec in workers}
        self.arrivals = arrivals
        self.records: dict[str, RequestRecord] = {}
        self.pending: dict[str, SimRequest] = {}
        self._slos = slos
        self._wake: Event | None = None
        self._ended = 0
        self.tracker = ServiceTracker(fairness_window_s)

    def _views(self) -> list[WorkerView]:
        now = self.loop.now
        return [w.view if w.ready_s <= now else _not_ready(w.view) for w in self.workers.values()]

    def run(self, progress: Callable[[float], None] | None = None) -> SimResult:
        self.scheduler.update_workers(self._views())
        for ready_s in sorted({w.ready_s for w in self.workers.values() if w.ready_s > 0}):
            self.loop.at(ready_s, ARRIVAL, self._workers_ready)
        for item in self.arrivals:
            self.loop.at(item.request.arrival_s, ARRIVAL, lambda item=item: self._arrive(item))  # type: ignore[misc]
        self.loop.run(on_event=progress)
        self.tracker.close(self.loop.now)
        return SimResult(list(self.records.values()), list(self.workers.values()), self.loop.now,
                         self.loop.processed, self.tracker)

    # -- scheduler side ------------------------------------------------------------------------
    def _workers_ready(self) -> None:
        self.scheduler.update_workers(self._views())
        self._pass()

    def _arrive(self, item: SimRequest) -> None:
        request, now = item.request, self.loop.now
        tenant = request.tenant
        self.records[request.request_id] = RequestRecord(
            request.request_id, tenant.name, tenant.tier, tenant.weight, request.arrival_s,
            request.prefill_tokens, item.output_tokens, self._slos(request))
        decision = self.scheduler.submit(request, now)
        if isinstance(decision, Rejected):
            self._end(request.request_id, Outcome.REJECTED, decision.reason.value)
            return
        self.pending[request.request_id] = item
        self.tracker.queued(tenant.name, tenant.tier, now)
        self._pass()

    def _pass(self) -> None:
        now = self.loop.now
        plan = self.scheduler.schedule(now)
        for dispatch in plan.dispatches:
            item = self.pending.pop(dispatch.request_id)
            record = self.records[dispatch.request_id]
            record.dispatch_s, record.worker_id = now, dispatch.worker_id
            request = item.request
            charge = (request.prefill_tokens + 2 * item.output_tokens) / request.tenant.weight
            self.tracker.left_queue(request.tenant.name, request.tier, now, charge)
            worker = self.workers[dispatch.worker_id]  # the request side of its path, then its engine
            worker.spec.path.enqueue(worker.engine, EngineSequence(request, item.output_tokens), self.loop)
        for expired in plan.expired:
            self._leave_queue(expired.request_id, Outcome.EXPIRED, "deadline")
        for shed in plan.shed:
            self._leave_queue(shed.request_id, Outcome.REJECTED, shed.reason.value)
        self._arm_wake()

    def _leave_queue(self, request_id: str, outcome: Outcome, reason: str) -> None:
        item = self.pending.pop(request_id)
        self.tracker.left_queue(item.request.tenant.name, item.request.tier, self.loop.now, 0.0)
        self._end(request_id, outcome, reason)

    def _arm_wake(self) -> None:
        deadline = self.scheduler.next_deadline_s()
        if deadline is None:
            return
        wake = self._wake
        if wake is not None and wake.alive and wake.time_s <= deadline:
            return
        if wake is not None:
            wake.cancel()
        self._wake = self.loop.at(deadline, WAKE, self._pass)

    def _end(self, request_id: str, outcome: Outcome, reason: str = "") -> None:
        record = self.records[request_id]
        if record.outcome is not None:
            raise AssertionError(f"request {request_id} ended twice ({record.outcome}, then {outcome})")
        record.outcome, record.reason = outcome, reason
        self._ended += 1
        if self._ended == len(self.arrivals):
            self.loop.stop()  # only stale wakes can be left

    # -- worker side (WorkerListener) -----------------------------------------------------------
    def first_token(self, request_id: str, now: float) -> None:
        self.records[request_id].first_token_s = now
        self.scheduler.first_token(request_id, now)

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        record = self.records[request_id]
        record.finish_s, record.generated = now, generated_tokens
        self._end(request_id, Outcome.COMPLETED)
        self.scheduler.complete(request_id, now, generated_tokens)
        self._pass()

    def dropped(self, request_id: str, now: float) -> None:
        """The engine's own queue timed the request out (Triton's lazy queue policy)."""
        self._end(request_id, Outcome.EXPIRED, "worker_queue_timeout")
        self.scheduler.complete(request_id, now, 0)
        self._pass()


def _not_ready(view: WorkerView) -> WorkerView:
    return WorkerView(view.worker_id, view.pool, view.region, view.profile, {}, view.healthy,
                      view.kv_total_tokens, view.kv_used_tokens)
