"""Decisions and outcomes, as frozen dataclasses and low-cardinality labels.

Every request ends in exactly one ``Outcome``; a rejection names its ``RejectReason`` and the
signal values that caused it, so that the client and the operator are told why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    COMPLETED = "completed"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    FAILED = "failed"


class RejectReason(StrEnum):
    """Why admission (or a later shed) turned a request away."""

    MAX_CONCURRENT = "max_concurrent"
    REQUESTS_PER_SECOND = "requests_per_second"
    TOKENS_PER_MINUTE = "tokens_per_minute"
    PREDICTED_SLO_MISS = "predicted_slo_miss"
    TIER_SHED = "tier_shed"
    NO_WORKER = "no_worker"
    RESIDENCY = "residency"
    TOO_LARGE = "too_large"
    QUEUE_FULL = "queue_full"
    MODEL_COLD = "model_cold"  # the model is at zero replicas and its deadline comes before it is ready

    @property
    def is_quota(self) -> bool:
        """True for the tenant's own limits (a 429), false for capacity (a 503) or fit (400/403)."""
        return self in (RejectReason.MAX_CONCURRENT, RejectReason.REQUESTS_PER_SECOND,
                        RejectReason.TOKENS_PER_MINUTE, RejectReason.TIER_SHED)


@dataclass(frozen=True)
class Admitted:
    """The request joined the queue; ``predicted_wait_s`` is the estimate it was admitted on;
    ``held``: it waits for a cold start (its model has no ready worker, ``holding``)."""

    request_id: str
    predicted_wait_s: float
    held: bool = False


@dataclass(frozen=True)
class Rejected:
    """The request was turned away (at admission, or shed from the queue later)."""

    request_id: str
    reason: RejectReason
    retry_after_s: float | None
    signals: dict[str, float] = field(default_factory=dict)

    def explain(self) -> str:
        shown = ", ".join(f"{name}={value:.3g}" for name, value in sorted(self.signals.items()))
        return f"{self.reason.value}" + (f" ({shown})" if shown else "")


Admission = Admitted | Rejected


@dataclass(frozen=True)
class Dispatch:
    """Release ``request_id`` to ``worker_id`` now."""

    request_id: str
    worker_id: str
    pool: str
    queue_wait_s: float


@dataclass(frozen=True)
class Expired:
    """``request_id`` passed its deadline while queued; it was never sent to a worker. ``held``:
    it was held for a cold start that did not finish in time (``holding``), and the model is
    predicted ready in ``ready_in_s``."""

    request_id: str
    late_by_s: float
    held: bool = False
    ready_in_s: float | None = None


@dataclass(frozen=True)
class SchedulePlan:
    """One pass of the scheduler: what to release, what expired, what was shed from the queue."""

    dispatches: tuple[Dispatch, ...] = ()
    expired: tuple[Expired, ...] = ()
    shed: tuple[Rejected, ...] = ()


@dataclass(frozen=True)
class QueueStatus:
    """Where a queued request stands: its place in service order and when it should start;
    ``held``: it waits until its model has a ready worker (``holding``; the gateway's status
    ``waiting_for_capacity``)."""

    position: int
    estimated_start_s: float
    held: bool = False
