"""``triton-queue``: no gateway queue. Each request goes at once to a worker chosen round-robin
among those that serve the model and fit its context; the worker's own per-model FIFO (Triton's
dynamic-batcher queue in front of the engine) holds it, with ``max_queue_size`` (a full queue
rejects: 503) and lazy timeouts (a request is dropped at its deadline only when it reaches the
head, as Triton's queue policy does). No quotas, tiers or tenant fairness.

It has the driver-facing verbs of ``scheduling.scheduler.Scheduler`` so the simulator drives it
the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.outcomes import Admitted, Dispatch, Rejected, RejectReason, SchedulePlan
from scheduling.requests import Request
from scheduling.workers import WorkerView

DEFAULT_MAX_QUEUE_SIZE = 64


class TritonQueue:
    def __init__(self, max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE) -> None:
        if max_queue_size < 0:
            raise ValueError("max_queue_size must be >= 0")
        self.max_queue_size = max_queue_size
        self.views: dict[str, WorkerView] = {}
        self.outstanding: dict[str, int] = {}
        self.worker_of: dict[str, str] = {}
        self._pending: list[Dispatch] = []
        self._last: dict[str, str] = {}

    def update_workers(self, views: Iterable[WorkerView]) -> None:
        self.views = {view.worker_id: view for view in views}
        for worker_id in self.views:
            self.outstanding.setdefault(worker_id, 0)

    def submit(self, request: Request, now: float) -> Admitted | Rejected:
        workers = sorted(w for w, v in self.views.items() if v.healthy and v.serves(request.model, None)
                         and request.context_tokens <= v.profile.max_context_tokens)
        if not workers:
            return Rejected(request.request_id, RejectReason.NO_WORKER, None)
        last = self._last.get(request.model, "")
        worker_id = next((w for w in workers if w > last), workers[0])
        self._last[request.model] = worker_id
        view = self.views[worker_id]
        if self.outstanding[worker_id] >= view.profile.max_sequences + self.max_queue_size:
            return Rejected(request.request_id, RejectReason.QUEUE_FULL, 1.0,
                            {"outstanding": float(self.outstanding[worker_id])})
        self.outstanding[worker_id] += 1
        self.worker_of[request.request_id] = worker_id
        self._pending.append(Dispatch(request.request_id, worker_id, view.pool, 0.0))
        return Admitted(request.request_id, 0.0)

    def schedule(self, now: float) -> SchedulePlan:
        dispatches, self._pending = tuple(self._pending), []
        return SchedulePlan(dispatches)

    def first_token(self, request_id: str, now: float) -> None:
        """Triton's queue learns nothing from first tokens."""

    def complete(self, request_id: str, now: float, generated_tokens: int = 0) -> bool:
        worker_id = self.worker_of.pop(request_id, None)
        if worker_id is None:
            return False
        self.outstanding[worker_id] -= 1
        return True

    def next_deadline_s(self) -> float | None:
        return None

    def service_counters(self) -> dict[str, float]:
        return {}
