"""The scheduler: one object that admits, queues, expires, places and dispatches, and takes in
what happened (``complete``, ``cancel``). It never runs a model; a driver does (the gateway's
asyncio loop, the simulator's event heap).

    submit(request, now) -> Admitted | Rejected
    schedule(now)        -> SchedulePlan(dispatches, expired, shed)
    first_token(id, now)  (LLM requests: corrects the predicted prefill line, learns the prompt cost)
    complete(id, now, generated_tokens) / cancel(id, now)
    requeue(id, now, deadline_s)  (its worker failed before it finished: queue it again, admission kept)
    next_deadline_s()    -> when the driver must call schedule() again at the latest

Predictions (a request's wait, its first output on a worker, its prompt's cost) are the
``Predictor``'s (``scheduling.prediction``): the scheduler asks it, and tells it what was queued,
dispatched, and what came back; its placement asks the same one.

Two policies share this code: ``fair`` (quotas, tier bands, VTC, EDF, predicted-wait admission,
tier shedding, per-tier shares of each worker's budget, cost-aware placement) and ``fifo``
(arrival order, no quotas, no admission estimate, least-loaded worker; the baseline). Both expire
queued requests at their deadline, so none is dispatched late.

TTFT expiry (``fair``, ``SchedulerConfig.expire_at_ttft``): a request that an idle worker could
serve within its TTFT objective also expires as soon as it can no longer meet it: its expiry time is
the objective minus the fastest feasible worker's prefill time, and at dispatch a request whose
predicted first token on the chosen worker falls past the objective expires instead of being
sent (capacity under overload goes to requests that can still meet their SLO). A request that
could never meet the objective is served best effort, bounded by its deadline only.

Held for capacity (``holding``): a model the driver gave a ``ColdStart`` (``update_cold_starts``)
that has no ready worker queues its requests as held instead of refusing them ``no_worker``:
bound by their deadline only, refused ``model_cold`` at once when the deadline comes before the
predicted ready time, dispatched by the first pass after a worker is ready for the model.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from scheduling.admission import AdmissionConfig, AdmissionControl
from scheduling.endpoint import Endpoint
from scheduling.fair_queue import TIERS_IN_ORDER, FairQueue, lane_of
from scheduling.fifo_queue import FifoQueue
from scheduling.holding import ColdStart, refuse_hold
from scheduling.outcomes import (
    Admission,
    Admitted,
    Dispatch,
    Expired,
    QueueStatus,
    Rejected,
    RejectReason,
    SchedulePlan,
)
from scheduling.placement import Placement, PlacementFactory, fair_placement, least_loaded_placement
from scheduling.prediction.predictor import Predictor
from scheduling.prediction.prefill_cost import PrefillCoefficients
from scheduling.prediction.start_wait import WaitEstimate
from scheduling.requests import Request, RequestKind
from scheduling.tenants import Tier
from scheduling.workers import ModelLimits, ServiceRate, WorkerLoad, WorkerView, kv_claim_tokens

NO_WORKER_RETRY_S = 5.0


class Policy(StrEnum):
    FAIR = "fair"
    FIFO = "fifo"


@dataclass(frozen=True)
class SchedulerConfig:
    policy: Policy = Policy.FAIR
    max_queued: int = 4096
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    expire_at_ttft: bool = True  # fair policy: expire a queued request once it cannot meet its TTFT objective
    lift_grace_s: float = 0.0  # fair policy: FairQueue.lift_grace_s (gateways sharing counters set it)
    min_share: Mapping[Tier, float] = field(default_factory=dict)  # fair policy: FairQueue.min_share (no starvation)


@dataclass(frozen=True)
class InFlight:
    """A dispatched request, with the KV tokens it was budgeted for on the worker
    (``workers.kv_claim_tokens``)."""

    request: Request
    worker_id: str
    pool: str
    dispatched_s: float
    kv_tokens: int = 0


class Scheduler:
    def __init__(self, config: SchedulerConfig, limits: Mapping[str, ModelLimits], rng: random.Random,
                 queue: FairQueue | FifoQueue | None = None, placement: PlacementFactory | None = None) -> None:
        """``queue`` and ``placement`` (built with ``rng`` and the scheduler's predictor) replace the
        policy's own (the simulator's baselines plug in ``TierPriorityQueue`` and
        ``RoundRobinPlacement``); by default ``config.policy`` picks both."""
        self.config = config
        fair = config.policy is Policy.FAIR
        self.limits = dict(limits) if fair else {
            name: replace(limit, tier_share={}, max_prefill_line_s=None) for name, limit in limits.items()}
        default_queue = (FairQueue(lift_grace_s=config.lift_grace_s, min_share=config.min_share) if fair
                         else FifoQueue())
        self.queue: FairQueue | FifoQueue = queue if queue is not None else default_queue
        admission = config.admission if fair else AdmissionConfig(
            shed_wait_s={}, enforce_quotas=False, reject_predicted_misses=False)
        self.admission = AdmissionControl(admission)
        self.predictor = Predictor(fair=fair and queue is None)
        default_placement: PlacementFactory = fair_placement if fair else least_loaded_placement
        self.placement: Placement = (placement if placement is not None else default_placement)(rng, self.predictor)
        self.views: dict[str, WorkerView] = {}
        self.loads: dict[str, WorkerLoad] = {}
        self.in_flight: dict[str, InFlight] = {}
        self._rates: dict[tuple[str, str], ServiceRate] = {}
        self._deadlines: list[tuple[float, str]] = []
        self._ttft_bound: dict[str, float] = {}  # request id -> time its first token is due (TTFT expiry)
        self._shed: list[Rejected] = []
        self._late: list[Expired] = []
        self._expire_at_ttft = fair and config.expire_at_ttft
        self.cold_starts: dict[str, ColdStart] = {}

    # -- workers ---------------------------------------------------------------------------------
    def update_workers(self, views: Iterable[WorkerView]) -> None:
        """Replace the worker views (static facts and live signals); loads and rates persist."""
        self.views = {view.worker_id: view for view in views}
        for worker_id in self.views:
            self.loads.setdefault(worker_id, WorkerLoad())

    def update_cold_starts(self, cold_starts: Iterable[ColdStart]) -> None:
        """Replace the models that may be at zero replicas (their requests are held while no
        worker is ready for them) and their predicted cold starts."""
        self.cold_starts = {cold.model: cold for cold in cold_starts}

    def is_cold(self, model: str) -> bool:
        """Whether ``model`` may scale to zero and no worker is ready for it now (requests held)."""
        return model in self.cold_starts and not any(model in view.ready_models for view in self.views.values())

    def held_requests(self) -> dict[str, int]:
        """Queued requests held for a cold start, per model (models with none are absent)."""
        held: dict[str, int] = {}
        for request in self.queue.queued():
            if self.is_cold(request.model):
                held[request.model] = held.get(request.model, 0) + 1
        return held

    def rate(self, worker_id: str, model: str) -> ServiceRate:
        key = (worker_id, model)
        if key not in self._rates:
            profile = self.views[worker_id].profile
            llm = self._kind(model) is RequestKind.LLM
            self._rates[key] = ServiceRate(profile.decode_tokens_per_s if llm else profile.prefill_tokens_per_s)
        return self._rates[key]

    def _kind(self, model: str) -> RequestKind:
        limits = self.limits.get(model)
        return limits.kind if limits is not None else RequestKind.BATCHED

    def endpoints(self, model: str, now: float = 0.0) -> list[Endpoint]:
        limits = self.limits.get(model, ModelLimits(model, RequestKind.BATCHED))
        share = self.predictor.output_share(limits)
        return [Endpoint(view, self.loads[view.worker_id], limits, self.rate(view.worker_id, model).tokens_per_s,
                         now, share)
                for view in self.views.values() if model in view.ready_models]

    # -- admission -------------------------------------------------------------------------------
    def estimate(self, request: Request, endpoints: Sequence[Endpoint]) -> WaitEstimate:
        """The wait of ``request`` behind the work the queue serves first (``Predictor.start_wait``)."""
        return self.predictor.start_wait(request, endpoints)

    def submit(self, request: Request, now: float) -> Admission:
        """Admit ``request`` into the queue, or reject it with the reason and its signals."""
        if request.request_id in self.queue or request.request_id in self.in_flight:
            raise ValueError(f"request {request.request_id} was already submitted")
        if self.is_cold(request.model):
            return self._hold(request, self.cold_starts[request.model], now)
        feasible = self.placement.feasible(request, self.endpoints(request.model, now))
        if isinstance(feasible, RejectReason):
            retry = NO_WORKER_RETRY_S if feasible is RejectReason.NO_WORKER else None
            return Rejected(request.request_id, feasible, retry, {"context_tokens": request.context_tokens})
        estimate = self.estimate(request, feasible)
        rejected = self.admission.check(request, estimate, now)
        if rejected is not None:
            return rejected
        if len(self.queue) >= self.config.max_queued and not self._make_room(request, now):
            self.admission.release(request, request.cost_tokens, now)
            return Rejected(request.request_id, RejectReason.QUEUE_FULL, estimate.predicted_wait_s,
                            {"queued": float(len(self.queue)), "max_queued": float(self.config.max_queued)})
        self._enqueue(request, estimate.service_s, feasible)
        return Admitted(request.request_id, estimate.predicted_wait_s)

    def _hold(self, request: Request, cold: ColdStart, now: float) -> Admission:
        """Admit ``request`` held for its model's cold start, or refuse it (``holding``)."""
        rejected = refuse_hold(request, cold, now) or self.admission.check_held(request, now)
        if rejected is not None:
            return rejected
        ready_in_s = cold.ready_at_s(now) - now
        if len(self.queue) >= self.config.max_queued and not self._make_room(request, now):
            self.admission.release(request, request.cost_tokens, now)
            return Rejected(request.request_id, RejectReason.QUEUE_FULL, ready_in_s,
                            {"queued": float(len(self.queue)), "max_queued": float(self.config.max_queued)})
        self._enqueue(request, float("inf"), ())  # no TTFT expiry: a cold start cannot meet it
        return Admitted(request.request_id, ready_in_s, held=True)

    def _make_room(self, request: Request, now: float) -> bool:
        """Shed the newest queued request of the lowest tier below ``request``'s (fair policy only)."""
        if self.config.policy is not Policy.FAIR:
            return False
        rank = TIERS_IN_ORDER.index
        lower = [r for r in self.queue.queued() if rank(r.tier) > rank(request.tier)]
        if not lower:
            return False
        victim = max(lower, key=lambda r: (rank(r.tier), r.arrival_s))
        self._dequeue(victim.request_id, now)
        self._shed.append(Rejected(victim.request_id, RejectReason.TIER_SHED, 1.0,
                                   {"queued": float(len(self.queue)), "shed_for_tier": float(rank(request.tier))}))
        return True

    def _enqueue(self, request: Request, service_s: float, feasible: Sequence[Endpoint]) -> None:
        self.queue.push(request)
        self.predictor.queued(request, feasible)
        expires_s = request.deadline_s
        slo_s = request.ttft_slo_s
        if self._expire_at_ttft and slo_s is not None and service_s <= slo_s:
            self._ttft_bound[request.request_id] = request.arrival_s + slo_s
            expires_s = min(expires_s, request.arrival_s + slo_s - service_s)
        heapq.heappush(self._deadlines, (expires_s, request.request_id))

    def _dequeue(self, request_id: str, now: float, release: bool = True) -> Request | None:
        request = self.queue.remove(request_id)
        if request is None:
            return None
        self._ttft_bound.pop(request_id, None)
        self.predictor.dequeued(request_id)
        if release:
            self.admission.release(request, request.cost_tokens, now)
        return request

    # -- dispatch --------------------------------------------------------------------------------
    def schedule(self, now: float) -> SchedulePlan:
        """Expire what passed its deadline, then release every request that a worker has budget for,
        in the queue's service order."""
        expired = self._expire(now)
        dispatches: list[Dispatch] = []
        blocked: set[tuple[str, frozenset[str]]] = set()
        while self.queue:
            dispatch = self._dispatch_next(blocked, now)
            if dispatch is None:
                break
            dispatches.append(dispatch)
        shed, self._shed = tuple(self._shed), []
        late, self._late = self._late, []
        return SchedulePlan(tuple(dispatches), tuple(expired + late), shed)

    def _dispatch_next(self, blocked: set[tuple[str, frozenset[str]]], now: float) -> Dispatch | None:
        """Place the first candidate that a worker takes; a candidate that would miss its TTFT
        objective on that worker expires instead (TTFT expiry)."""
        for request in self.queue.candidates(lambda lane: lane in blocked):
            endpoint = self.placement.place(request, self.endpoints(request.model, now))
            if endpoint is None:
                blocked.add(lane_of(request))
                continue
            due_s = self._ttft_bound.get(request.request_id)
            late_s = now + self.predictor.first_output_s(request, endpoint) - due_s if due_s is not None else 0.0
            if late_s > 0:
                self._dequeue(request.request_id, now)
                self._late.append(Expired(request.request_id, late_s))
                continue
            self._dequeue(request.request_id, now, release=False)
            self.queue.charge(request)
            prefill = self.predictor.prefill(request, endpoint)
            kv_tokens = kv_claim_tokens(request, endpoint.output_share) if request.kind is RequestKind.LLM else 0
            self.loads[endpoint.worker_id].add(request, now, prefill.seconds, kv_tokens, prefill.work_tokens)
            self.predictor.dispatched(request, endpoint)
            self.in_flight[request.request_id] = InFlight(request, endpoint.worker_id, endpoint.view.pool, now,
                                                          kv_tokens)
            return Dispatch(request.request_id, endpoint.worker_id, endpoint.view.pool, now - request.arrival_s)
        return None

    def _expire(self, now: float) -> list[Expired]:
        expired: list[Expired] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline_s, request_id = heapq.heappop(self._deadlines)
            request = self._dequeue(request_id, now)
            if request is not None:
                expired.append(self._expired(request, now - deadline_s, now))
        return expired

    def _expired(self, request: Request, late_by_s: float, now: float) -> Expired:
        if not self.is_cold(request.model):
            return Expired(request.request_id, late_by_s)
        ready_in_s = self.cold_starts[request.model].ready_at_s(now) - now
        return Expired(request.request_id, late_by_s, held=True, ready_in_s=ready_in_s)

    def next_deadline_s(self) -> float | None:
        """The earliest deadline among queued requests (the driver wakes then at the latest)."""
        while self._deadlines and self._deadlines[0][1] not in self.queue:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    # -- outcomes --------------------------------------------------------------------------------
    def complete(self, request_id: str, now: float, generated_tokens: int = 0) -> InFlight | None:
        """A dispatched request finished (any outcome): free its budget, learn the worker's speed,
        correct the tenant's counter and quota by the output it did not use."""
        flight = self.in_flight.pop(request_id, None)
        if flight is None:
            return None
        request = flight.request
        loads = self.loads.get(flight.worker_id)
        busy_s = loads.remove(request, now, flight.kv_tokens) if loads is not None else 0.0
        done_units = (request.prefill_tokens + generated_tokens or request.rows) * request.cost_factor
        if (flight.worker_id, request.model) in self._rates or flight.worker_id in self.views:
            self.rate(flight.worker_id, request.model).record(done_units, busy_s)
        self.predictor.completed(request, generated_tokens)
        self.queue.refund(request, generated_tokens)
        self.admission.release(request, request.unused_tokens(generated_tokens), now)
        return flight

    def requeue(self, request_id: str, now: float, deadline_s: float) -> bool:
        """A dispatched request's worker failed before the request finished: take it off that
        worker (learning nothing of its speed) and queue it again, to be dispatched by
        ``deadline_s`` or expire then. Its admission holds (no quota is taken twice, the
        concurrency slot stays), and the first dispatch's charge to its tenant's counter is
        returned, so a retry costs the tenant no service. False if it was not in flight."""
        flight = self.in_flight.pop(request_id, None)
        if flight is None:
            return False
        request = flight.request
        loads = self.loads.get(flight.worker_id)
        if loads is not None:
            loads.remove(request, now, flight.kv_tokens)
        self.queue.uncharge(request)
        retry = replace(request, deadline_s=max(deadline_s, request.arrival_s))
        self.queue.push(retry)
        self.predictor.queued(retry, self.endpoints(request.model, now))
        heapq.heappush(self._deadlines, (retry.deadline_s, request_id))
        return True

    def first_token(self, request_id: str, now: float) -> None:
        """A dispatched LLM request produced its first token: the predictor corrects the worker's
        predicted prefill line by how late (or early) it came, and learns what its prompt cost the
        engine (``Predictor.first_token``). A driver that serves LLMs must call it: until a
        prompt's first token is seen, the line counts it as still waiting, and late once its
        predicted first token has passed."""
        flight = self.in_flight.get(request_id)
        if flight is None or flight.worker_id not in self.loads:
            return
        self.predictor.first_token(self.loads[flight.worker_id].model(flight.request.model), request_id, now)

    def cancel(self, request_id: str, now: float, generated_tokens: int = 0) -> bool:
        """The client went away: drop the request from the queue, or end it if in flight."""
        if self._dequeue(request_id, now) is not None:
            return True
        return self.complete(request_id, now, generated_tokens) is not None

    def status(self, request_id: str, now: float) -> QueueStatus | None:
        """Place in service order among queued requests of the same model, and estimated start."""
        ordered = [r for r in self.queue.ordered()]
        target = next((r for r in ordered if r.request_id == request_id), None)
        if target is None:
            return None
        ahead = [r for r in ordered[: ordered.index(target)] if r.model == target.model]
        if self.is_cold(target.model):
            ready_at_s = self.cold_starts[target.model].ready_at_s(now)
            return QueueStatus(position=len(ahead), estimated_start_s=ready_at_s, held=True)
        wait = self.predictor.start_wait_behind(target, ahead, self.endpoints(target.model, now))
        return QueueStatus(position=len(ahead), estimated_start_s=now + wait.predicted_wait_s)

    def prefill_costs(self) -> dict[tuple[str, str], PrefillCoefficients]:
        """What a prompt costs each worker's engine, per LLM model dispatched there (learned from
        first tokens, ``prediction.prefill_cost``), keyed by (worker id, model)."""
        return {(worker_id, model): load.prefill_coefficients(self.views[worker_id].profile)
                for worker_id, loads in self.loads.items() if worker_id in self.views
                for model, load in loads.by_model.items() if self._kind(model) is RequestKind.LLM}

    def service_counters(self) -> dict[str, float]:
        """Weighted service per tenant (the fair queue's virtual token counters)."""
        return dict(self.queue.counters)

    def add_service(self, weighted_service: Mapping[str, float]) -> None:
        """Count service that other gateways gave these tenants (weighted, as in
        ``service_counters``), so the fair queue orders tenants by their fleet-wide service."""
        for tenant, service in weighted_service.items():
            self.queue.counters[tenant] = self.queue.counters.get(tenant, 0.0) + service


def build_scheduler(config: SchedulerConfig, limits: Mapping[str, ModelLimits], seed: int = 0, *,
                    queue: FairQueue | FifoQueue | None = None,
                    placement: PlacementFactory | None = None) -> Scheduler:
    """A scheduler for ``config.policy`` with a seeded tie-breaking RNG; ``queue`` and ``placement``
    (a factory given that RNG and the scheduler's predictor) replace the policy's defaults."""
    if config.max_queued < 1:
        raise ValueError("max_queued must be >= 1")
    return Scheduler(config, limits, random.Random(seed), queue, placement)
