"""Round-robin placement (the ``round-robin`` baseline of the simulator): among the feasible
workers with budget, the next one after the last chosen, in worker-id order, whatever their load.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduling.endpoint import Endpoint
from scheduling.placement.filters import HasBudget
from scheduling.placement.pipeline import HARD_FILTERS, Placement
from scheduling.prediction.predictor import Predictor
from scheduling.requests import Request


@dataclass
class RoundRobinPlacement(Placement):
    _last: dict[str, str] = field(default_factory=dict)

    def place(self, request: Request, endpoints: Sequence[Endpoint]) -> Endpoint | None:
        """The first worker with budget after the one chosen last for this model (cyclically)."""
        feasible = self.feasible(request, endpoints)
        if not isinstance(feasible, list):
            return None
        ready = sorted(HasBudget(predictor=self.predictor)(request, feasible), key=lambda e: e.worker_id)
        if not ready:
            return None
        last = self._last.get(request.model, "")
        chosen = next((e for e in ready if e.worker_id > last), ready[0])
        self._last[request.model] = chosen.worker_id
        return chosen


def round_robin_placement(rng: random.Random, predictor: Predictor | None = None) -> RoundRobinPlacement:
    """Hard filters only, no scorers: the rotation decides."""
    return RoundRobinPlacement(HARD_FILTERS, (), {}, rng, predictor if predictor is not None else Predictor())
