"""Placement as small plugins: filters narrow the endpoints, scorers rate them in [0, 1], a picker
chooses. ``Placement.place`` runs that pipeline; ``fair_placement`` and ``least_loaded_placement``
build the two shipped configurations (see README.md)."""

from scheduling.endpoint import Endpoint
from scheduling.placement.pipeline import Placement, PlacementFactory, fair_placement, least_loaded_placement

__all__ = ["Endpoint", "Placement", "PlacementFactory", "fair_placement", "least_loaded_placement"]
