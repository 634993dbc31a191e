"""The placement pipeline: filters, weighted scorers, picker.

``feasible`` runs the hard filters only and says which one left nothing (for admission's reason);
``place`` also applies the dispatch budget and the soft SLO filter, sums each scorer's score times
its weight for the request's tier, and picks the highest (ties broken by the injected
``random.Random``, so equal workers share load and runs stay reproducible).

The plugins that need a prediction ask the placement's ``Predictor``: the scheduler builds its
placement with its own (``PlacementFactory``), so placement and admission ask one object.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from scheduling.endpoint import Endpoint
from scheduling.outcomes import RejectReason
from scheduling.placement.filters import ContextFits, Filter, HasBudget, Healthy, MeetsSlo, ModelResident, RegionAllowed
from scheduling.placement.scorers import (
    BudgetHeadroom,
    Capability,
    CheapPerRequest,
    ContextHeadroom,
    LatencyAgainstSlo,
    LeastLoaded,
    Scorer,
)
from scheduling.prediction.predictor import Predictor
from scheduling.requests import Request
from scheduling.tenants import Tier

_REASON_OF_FILTER = {"region_allowed": RejectReason.RESIDENCY, "context_fits": RejectReason.TOO_LARGE}
_TIE_EPSILON = 1e-9


@dataclass
class Placement:
    hard_filters: tuple[Filter, ...]
    soft_filters: tuple[Filter, ...]
    weights: Mapping[Tier, tuple[tuple[Scorer, float], ...]]
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    predictor: Predictor = field(default_factory=Predictor)

    def feasible(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint] | RejectReason:
        """Endpoints that could ever serve ``request``, or the reason none can."""
        remaining = list(endpoints)
        for check in self.hard_filters:
            remaining = check(request, remaining)
            if not remaining:
                return _REASON_OF_FILTER.get(check.name, RejectReason.NO_WORKER)
        return remaining

    def place(self, request: Request, endpoints: Sequence[Endpoint]) -> Endpoint | None:
        """The endpoint to dispatch ``request`` to now, or None when none has budget."""
        feasible = self.feasible(request, endpoints)
        if isinstance(feasible, RejectReason):
            return None
        remaining = HasBudget(predictor=self.predictor)(request, feasible)
        for check in self.soft_filters:
            remaining = check(request, remaining)
        if not remaining:
            return None
        if len(remaining) == 1:
            return remaining[0]
        totals = {e.worker_id: 0.0 for e in remaining}
        for scorer, weight in self.weights.get(request.tier, ()):
            for worker_id, score in scorer(request, remaining).items():
                totals[worker_id] += weight * min(1.0, max(0.0, score))
        best = max(totals.values())
        tied = sorted(e.worker_id for e in remaining if totals[e.worker_id] >= best - _TIE_EPSILON)
        chosen = tied[0] if len(tied) == 1 else self.rng.choice(tied)
        return next(e for e in remaining if e.worker_id == chosen)


HARD_FILTERS: tuple[Filter, ...] = (Healthy(), ModelResident(), RegionAllowed(), ContextFits())

PlacementFactory = Callable[[random.Random, Predictor], Placement]
"""What the scheduler builds its placement with: its tie-breaking RNG and its predictor."""


def fair_placement(rng: random.Random, predictor: Predictor | None = None) -> Placement:
    """Premium and long requests to big GPUs, small low-priority ones to cheap GPUs that meet the SLO."""
    predictor = predictor if predictor is not None else Predictor()
    latency, headroom = LatencyAgainstSlo(predictor=predictor), BudgetHeadroom()
    cost = CheapPerRequest(predictor=predictor)
    capability, context = Capability(), ContextHeadroom()
    weights: dict[Tier, tuple[tuple[Scorer, float], ...]] = {
        Tier.PREMIUM: ((latency, 2.0), (capability, 2.0), (headroom, 1.0), (context, 1.0)),
        # Standard's TTFT objective is loose: past meeting it (the MeetsSlo filter), dollars count
        # more than speed, so cost weighs 3 and latency 1 (2 / 2 sent long prompts to big GPUs).
        Tier.STANDARD: ((latency, 1.0), (headroom, 1.0), (context, 1.0), (cost, 3.0)),
        Tier.BATCH: ((latency, 0.5), (headroom, 1.0), (context, 0.5), (cost, 3.0)),
    }
    return Placement(HARD_FILTERS, (MeetsSlo(predictor=predictor),), weights, rng, predictor)


def least_loaded_placement(rng: random.Random, predictor: Predictor | None = None) -> Placement:
    """The baseline: any feasible worker with budget, fewest requests in flight."""
    only = ((LeastLoaded(), 1.0),)
    return Placement(HARD_FILTERS, (), {tier: only for tier in Tier}, rng,
                     predictor if predictor is not None else Predictor())
