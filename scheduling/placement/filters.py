"""Filters: ``(request, endpoints) -> endpoints``. Hard ones drop what can never serve the
request; ``MeetsSlo`` is soft (keeps every endpoint when none meets the SLO)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduling.placement.endpoint import Endpoint
from scheduling.placement.latency import predicted_latency_s, ttft_left_s
from scheduling.requests import Request
from scheduling.workers import budget_fits, line_fits


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

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        return [e for e in endpoints
                if budget_fits(request, e.view, e.load, e.limits, e.output_share)
                and line_fits(request, e.view, e.load, e.limits, e.now_s)]


@dataclass(frozen=True)
class MeetsSlo:
    """Soft: keep the endpoints predicted to meet the request's TTFT objective (what is left of it
    after its queue wait), if any do."""

    name: str = "meets_slo"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> list[Endpoint]:
        if request.ttft_slo_s is None:
            return list(endpoints)
        meeting = [e for e in endpoints if predicted_latency_s(request, e) <= (ttft_left_s(request, e) or 0.0)]
        return meeting or list(endpoints)
