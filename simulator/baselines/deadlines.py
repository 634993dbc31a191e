"""A core scheduler given requests with another queue deadline; nothing else changes.

``no_deadline`` models a plain load balancer in front of the engines (no gateway deadline, so a
request waits in arrival order however late: ``fcfs`` and ``round-robin``); ``slo_deadline`` models
an operator who sets each tier's queue ``deadline_s`` in ``scheduling.yaml`` to its TTFT objective
(the ``shunter-slo`` variant), so admission rejects predicted misses and expiry drops the hopeless.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from scheduling.outcomes import Admission, SchedulePlan
from scheduling.requests import Request
from scheduling.scheduler import Scheduler
from scheduling.workers import WorkerView

NO_DEADLINE_S = 1e9


def no_deadline(request: Request) -> float:
    return request.arrival_s + NO_DEADLINE_S


def slo_deadline(request: Request) -> float:
    """The TTFT objective as the queue deadline (never later than the request's own)."""
    if request.ttft_slo_s is None:
        return request.deadline_s
    return min(request.deadline_s, request.arrival_s + request.ttft_slo_s)


class DeadlineOverride:
    """Forwards every verb to ``scheduler``; ``submit`` first replaces the request's deadline."""

    def __init__(self, scheduler: Scheduler, deadline_of: Callable[[Request], float]) -> None:
        self.scheduler = scheduler
        self.deadline_of = deadline_of
        self._no_wakes = deadline_of is no_deadline

    def update_workers(self, views: Iterable[WorkerView]) -> None:
        self.scheduler.update_workers(views)

    def submit(self, request: Request, now: float) -> Admission:
        return self.scheduler.submit(replace(request, deadline_s=self.deadline_of(request)), now)

    def schedule(self, now: float) -> SchedulePlan:
        return self.scheduler.schedule(now)

    def first_token(self, request_id: str, now: float) -> None:
        self.scheduler.first_token(request_id, now)

    def complete(self, request_id: str, now: float, generated_tokens: int = 0) -> object:
        return self.scheduler.complete(request_id, now, generated_tokens)

    def next_deadline_s(self) -> float | None:
        return None if self._no_wakes else self.scheduler.next_deadline_s()

    def service_counters(self) -> dict[str, float]:
        return self.scheduler.service_counters()
