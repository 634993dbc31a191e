"""Held for capacity: the requests of a model at zero replicas wait in the fair queue for its cold start.

A model that may scale to zero is given to the scheduler as a ``ColdStart`` (by the driver, from
the capacity configuration and what control says of its replicas). While no ready worker serves
it, its requests are not refused with ``no_worker``: admission takes them *held*:

- queued like any other request: tier bands, tenant counters, earliest deadline first, so when a
  replica comes up the premium requests go first and a tenant with many held requests does not
  take the whole replica;
- bound by their deadline only: a cold start cannot meet a TTFT objective, so neither the TTFT
  objective nor the tier's shedding wait refuses or expires a held request; its deadline does
  (``Expired.held``: the gateway's 504 ``model_cold``);
- refused at once (``RejectReason.MODEL_COLD``, retry after the predicted ready time) when its
  deadline comes before the predicted ready time;
- dispatched by the first scheduling pass after the driver reports a ready worker for the model.

The predicted ready time is the start of the replica that is starting (when the driver knows one)
plus the predicted cold start, else now plus the cold start, and never before now. Nothing here
reads a clock: ``now`` comes in.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.outcomes import Rejected, RejectReason
from scheduling.requests import Request


@dataclass(frozen=True)
class ColdStart:
    """A model that may be at zero replicas, and how long waking it is predicted to take.

    ``cold_start_s``: seconds from starting a replica to the model being ready (loaded and warmed);
    ``starting_since_s``: when the replica now starting for it began, on the driver's clock (None:
    none is starting); ``regions``: the regions of the pools that may serve it (empty: any), so a
    tenant whose residency excludes them all is refused ``residency`` as when it is warm.
    """

    model: str
    cold_start_s: float
    starting_since_s: float | None = None
    regions: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.cold_start_s < 0:
            raise ValueError("cold_start_s must be >= 0")

    def ready_at_s(self, now: float) -> float:
        """When a replica is predicted to be ready for the model (never before ``now``)."""
        started_s = now if self.starting_since_s is None else min(now, self.starting_since_s)
        return max(now, started_s + self.cold_start_s)

    def region_allowed(self, request: Request) -> bool:
        allowed = request.tenant.allowed_regions
        return not allowed or not self.regions or bool(allowed & self.regions)


def refuse_hold(request: Request, cold: ColdStart, now: float) -> Rejected | None:
    """Why ``request`` cannot be held for ``cold`` (residency, or a deadline before the predicted
    ready time: ``model_cold``, retry when the model should be ready), or None when it can."""
    if not cold.region_allowed(request):
        return Rejected(request.request_id, RejectReason.RESIDENCY, None, {})
    ready_in_s = cold.ready_at_s(now) - now
    if now + ready_in_s > request.deadline_s:
        return Rejected(request.request_id, RejectReason.MODEL_COLD, ready_in_s,
                        {"ready_in_s": ready_in_s, "cold_start_s": cold.cold_start_s,
                         "deadline_in_s": request.deadline_s - now})
    return None
