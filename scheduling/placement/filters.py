"""Filters: ``(request, endpoints) -> endpoints``. Hard ones drop what can never serve the
request; ``MeetsSlo`` is soft (keeps every endpoint when none meets the SLO). The two that read a
prediction (``HasBudget``: the engine's line; ``MeetsSlo``: the first output) ask their
``Predictor``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.endpoint import Endpoint
from scheduling.prediction.predictor import Predictor
from scheduling.requests import Request
from scheduling.workers import budget_fits


class Filter(Protocol):
    @property
    def name(self) -> str: ...


    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]: ...


@dataclass(frozen=True)
class Healthy:
    name: str = "healthy"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        return [e for e in endpoints if e.view.healthy]


@dataclass(frozen=True)
class ModelResident:
    """The model (and the version the request names, if any) is READY on the worker."""

    name: str = "model_resident"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        return [e for e in endpoints if e.view.serves(request.model, request.model_version)]


@dataclass(frozen=True)
class RegionAllowed:
    """The worker's region is in the tenant's residency (an empty residency allows all)."""

    name: str = "region_allowed"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        regions = request.tenant.allowed_regions
        return [e for e in endpoints if not regions or e.view.region in regions]


@dataclass(frozen=True)
class ContextFits:
    """The GPU type takes a sequence this long and supports the model."""

    name: str = "context_fits"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        return [e for e in endpoints
                if request.context_tokens <= e.view.profile.max_context_tokens
                and e.view.profile.supports(request.model)]


@dataclass(frozen=True)
class HasBudget:
    """Dispatching now keeps the worker within its KV / row budget and its prefill line bound."""

    name: str = "has_budget"
    predictor: Predictor = field(default_factory=Predictor)

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        return [e for e in endpoints
                if budget_fits(request, e.view, e.load, e.limits, e.output_share)
                and self.predictor.line_fits(request, e)]


@dataclass(frozen=True)
class MeetsSlo:
    """Soft: keep the endpoints predicted to meet the request's TTFT objective (what is left of it
    after its queue wait), if any do."""

    name: str = "meets_slo"
    predictor: Predictor = field(default_factory=Predictor)

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        if request.ttft_slo_s is None:
            return list(endpoints)
        meeting = [e for e in endpoints
                   if self.predictor.first_output_s(request, e) <= (_ttft_left_s(request, e) or 0.0)]
        return meeting or list(endpoints)


def _ttft_left_s(request: Request, endpoint: Endpoint) -> float | None:
    """What is left of the request's TTFT objective at the snapshot's time (None: no objective)."""
    if request.ttft_slo_s is None:
        return None
    return request.ttft_slo_s - max(0.0, endpoint.now_s - request.arrival_s)
