"""Scorers: ``(request, endpoints) -> {worker_id: score in [0, 1]}``; weights live in the
pipeline, so each scorer only says how good an endpoint is on one axis. Those that read a
prediction (the first output, the prompt an engine must compute) ask their ``Predictor``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.endpoint import Endpoint
from scheduling.prediction.predictor import Predictor
from scheduling.requests import Request
from scheduling.workers import headroom, kv_capacity_tokens

Scores = dict[str, float]


class Scorer(Protocol):
    @property
    def name(self) -> str: ...


    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores: ...


@dataclass(frozen=True)
class BudgetHeadroom:
    """Share of the worker's KV (LLM) or row (batched) budget left after placing the request."""

    name: str = "budget_headroom"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        return {e.worker_id: headroom(request, e.view, e.load, e.limits, e.output_share) for e in endpoints}


@dataclass(frozen=True)
class LatencyAgainstSlo:
    """1 for an instant start, 0 at (or past) the TTFT objective; without one, relative speed."""

    name: str = "latency"
    predictor: Predictor = field(default_factory=Predictor)

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        predicted = {e.worker_id: self.predictor.first_output_s(request, e) for e in endpoints}
        if request.ttft_slo_s:
            return {w: max(0.0, 1.0 - p / request.ttft_slo_s) for w, p in predicted.items()}
        best = min(predicted.values(), default=0.0)
        return {w: (best / p if p > 0 else 1.0) for w, p in predicted.items()}


@dataclass(frozen=True)
class CheapPerToken:
    """The cheapest GPU type per decoded token scores 1; others its cost over theirs."""

    name: str = "cost"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        costs = {e.worker_id: e.view.profile.cost_per_token for e in endpoints}
        cheapest = min(costs.values(), default=0.0)
        return {w: (cheapest / c if c > 0 else 1.0) for w, c in costs.items()}


def request_cost(request: Request, endpoint: Endpoint, prompt_tokens: int) -> float:
    """Predicted dollars to serve ``request`` on the endpoint's GPU type, from its profile: the
    prompt (``prompt_tokens``: what the engine must compute of it) at the prefill speed plus the
    reserved output at the decode cost per token.

    With a decode model in the profile (``CapacityProfile.decode_s_per_token``) an output token
    costs one iteration's time over the batch that sequences of this length fill (a long sequence
    on a small-memory GPU decodes in a small, inefficient batch). Without one, the profile's decode
    speed is scaled down by how far such sequences fall short of filling ``max_sequences``."""
    profile = endpoint.view.profile
    context = max(1, request.context_tokens)
    capacity = kv_capacity_tokens(endpoint.view)
    per_token = profile.decode_s_per_token(context, capacity)
    if per_token is None:
        batch_fill = min(1.0, capacity / (context * profile.max_sequences))
        per_token = 1.0 / (profile.decode_tokens_per_s * batch_fill)
    prefill_s = prompt_tokens / profile.prefill_tokens_per_s
    seconds = prefill_s + request.max_output_tokens * per_token
    return profile.cost_per_hour / 3600.0 * seconds


@dataclass(frozen=True)
class CheapPerRequest:
    """Length-aware cost: the GPU type predicted to serve this request for the fewest dollars
    (``request_cost``) scores 1, others that cost over theirs. Short requests favour cheap GPUs,
    long ones the GPUs whose memory holds a full batch of them."""

    name: str = "request_cost"
    predictor: Predictor = field(default_factory=Predictor)

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        costs = {e.worker_id: request_cost(request, e, self.predictor.uncached_prompt_tokens(request, e))
                 for e in endpoints}
        cheapest = min(costs.values(), default=0.0)
        return {w: (cheapest / c if c > 0 else 1.0) for w, c in costs.items()}


@dataclass(frozen=True)
class Capability:
    """Bigger GPUs score higher: memory times decode speed, relative to the biggest endpoint."""

    name: str = "capability"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        size = {e.worker_id: e.view.profile.memory_gib * e.view.profile.decode_tokens_per_s for e in endpoints}
        biggest = max(size.values(), default=0.0)
        return {w: (s / biggest if biggest > 0 else 1.0) for w, s in size.items()}


@dataclass(frozen=True)
class ContextHeadroom:
    """How much of the GPU type's context the request leaves free (long requests favour big contexts)."""

    name: str = "context_headroom"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        return {e.worker_id: max(0.0, 1.0 - request.context_tokens / e.view.profile.max_context_tokens)
                for e in endpoints}


@dataclass(frozen=True)
class LeastLoaded:
    """Fewest requests of the model in flight scores 1 (the baseline's only criterion)."""

    name: str = "least_loaded"

    def __call__(self, request: Request, endpoints: Sequence[Endpoint]) -> Scores:
        return {e.worker_id: 1.0 / (1 + e.load.model(request.model).requests) for e in endpoints}
