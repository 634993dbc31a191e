"""The gateway's side of autoscaling: which models hold their requests at zero, their predicted
cold starts, and the signals control's capacity controller reads from ``/metrics``.

``CapacityPlan.build`` reads, once, what the capacity configuration (``capacity.yaml``, the
policy's ``AutoscalingConfig``) says the gateway needs: the models that may scale to zero (their
requests are held while no replica is ready, ``scheduling.holding``) and the pools and regions of
every model. ``cold_starts(document, now)`` gives the scheduling core a ``ColdStart`` per such
model: control's predicted cold start from the replicas document when it sends one, else the
gateway's configured ``cold_start_s``; the start of a replica of one of its pools that control
says is ``starting`` (else the cold start counts from now).

Signals (Prometheus, on the gateway's ``/metrics``; labels only from configured pool and model
names, never from client input), computed from the scheduling core's queue and in-flight
requests each time ``/metrics`` is read:

    shunter_capacity_pending_tokens{pool,model,kind}    queued requests' tokens: kind="prompt" and
                                                        kind="output" (their max output); the sum
                                                        over kind is prompt + max output tokens
    shunter_capacity_inflight_tokens{pool,model}        prompt + max output tokens of dispatched,
                                                        unfinished requests
    shunter_capacity_held_requests{model}               requests held for a cold start
    shunter_capacity_arrived_tokens_total{model,kind}   tokens of requests that reached admission
                                                        (kind: prompt | output), for arrival rates
    shunter_capacity_tenant_tokens_total{model,tenant}  the same, prompt + output, by (configured)
                                                        tenant: the tenants' shares of the demand
    shunter_capacity_held_region_requests{model,region} held requests that may run in the region

Token counts are the core's cost tokens (a model's ``token_cost_factor`` applied; a model without
tokens, vision, counts its rows). A queued request is not placed yet: its tokens are split evenly
over the pools that serve its model in a region its tenant allows, so summing over pools gives
each model's backlog exactly once. In-flight tokens count on the pool the request runs on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.metrics import GatewayMetrics
from scheduling.autoscaling import AutoscalingConfig
from scheduling.holding import ColdStart
from scheduling.requests import Request
from scheduling.scheduler import Scheduler
from settings.capacity_wire import ReplicasDocument, ReplicaState
from settings.stack import StackConfig

DEFAULT_COLD_START_S = 10.0


@dataclass(frozen=True)
class ModelPools:
    """The pools that serve one model, with their regions."""

    model: str
    regions: Mapping[str, str]  # pool -> region

    def for_request(self, request: Request) -> list[str]:
        """The pools ``request``'s tenant may use (all when it names no regions)."""
        allowed = request.tenant.allowed_regions
        return [pool for pool, region in self.regions.items() if not allowed or region in allowed]


@dataclass(frozen=True)
class CapacityPlan:
    """What the gateway needs of the capacity configuration; see the module docstring."""

    pools: Mapping[str, ModelPools]  # every configured model
    scale_to_zero: frozenset[str] = frozenset()  # models whose requests are held at zero
    cold_start_s: float = DEFAULT_COLD_START_S  # predicted cold start when control gives none

    @classmethod
    def build(cls, stack: StackConfig, autoscaling: AutoscalingConfig | None = None,
              cold_start_s: float = DEFAULT_COLD_START_S) -> CapacityPlan:
        pools = {model.name: ModelPools(model.name, {p.name: p.region for p in stack.pools if model.name in p.models})
                 for model in stack.models}
        models = autoscaling.models.values() if autoscaling is not None else ()
        held = frozenset(m.model for m in models if m.scale_to_zero)
        return cls(pools, held, cold_start_s)

    def cold_starts(self, document: ReplicasDocument | None, now: float) -> list[ColdStart]:
        """A ``ColdStart`` for every model that may scale to zero (``document``: control's, if fresh)."""
        return [self._cold_start(model, document, now) for model in sorted(self.scale_to_zero)]

    def _cold_start(self, model: str, document: ReplicasDocument | None, now: float) -> ColdStart:
        pools = self.pools[model].regions
        cold_start_s = self.cold_start_s
        starting: list[float] = []
        if document is not None:
            cold_start_s = document.cold_start_s.get(model, cold_start_s)
            starting = [now - r.since_s for r in document.replicas
                        if r.state is ReplicaState.STARTING and r.pool in pools]
        return ColdStart(model, cold_start_s, min(starting) if starting else None, frozenset(pools.values()))


def _prompt_and_output(request: Request) -> tuple[float, float]:
    """A request's prompt (rows for a model without tokens) and reserved output, in cost tokens."""
    prompt = request.prefill_tokens if request.prefill_tokens + request.max_output_tokens else request.rows
    return prompt * request.cost_factor, request.max_output_tokens * request.cost_factor


def _add(totals: dict[tuple[str, str], list[float]], key: tuple[str, str], prompt: float, output: float) -> None:
    entry = totals.setdefault(key, [0.0, 0.0])
    entry[0] += prompt
    entry[1] += output


@dataclass(frozen=True)
class CapacitySignals:
    """Publishes the capacity gauges of the module docstring from the scheduling core's state."""

    metrics: GatewayMetrics
    plan: CapacityPlan

    def publish(self, scheduler: Scheduler) -> None:
        pending = self._pending(scheduler.queue.queued())
        inflight: dict[tuple[str, str], list[float]] = {}
        for flight in scheduler.in_flight.values():
            _add(inflight, (flight.pool, flight.request.model), *_prompt_and_output(flight.request))
        held = scheduler.held_requests()
        held_regions = self._held_regions(r for r in scheduler.queue.queued() if scheduler.is_cold(r.model))
        m = self.metrics
        for model, pools in self.plan.pools.items():
            m.capacity_held_requests.labels(model).set(held.get(model, 0))
            for region in sorted(set(pools.regions.values())):
                m.capacity_held_regions.labels(model, region).set(held_regions.get((model, region), 0))
            for pool in pools.regions:
                prompt, output = pending.get((pool, model), (0.0, 0.0))
                m.capacity_pending_tokens.labels(pool, model, "prompt").set(prompt)
                m.capacity_pending_tokens.labels(pool, model, "output").set(output)
                m.capacity_inflight_tokens.labels(pool, model).set(sum(inflight.get((pool, model), (0.0, 0.0))))

    def _pending(self, queued: Iterable[Request]) -> dict[tuple[str, str], list[float]]:
        pending: dict[tuple[str, str], list[float]] = {}
        for request in queued:
            model_pools = self.plan.pools.get(request.model)
            pools = model_pools.for_request(request) if model_pools is not None else []
            prompt, output = _prompt_and_output(request)
            for pool in pools:
                _add(pending, (pool, request.model), prompt / len(pools), output / len(pools))
        return pending

    def _held_regions(self, held: Iterable[Request]) -> dict[tuple[str, str], int]:
        """(model, region) -> held requests whose tenant may run in the region."""
        counts: dict[tuple[str, str], int] = {}
        for request in held:
            model_pools = self.plan.pools.get(request.model)
            if model_pools is None:
                continue
            for region in {model_pools.regions[p] for p in model_pools.for_request(request)}:
                counts[(request.model, region)] = counts.get((request.model, region), 0) + 1
        return counts

    def arrived(self, request: Request) -> None:
        """Count a request that reached admission (any decision) in the arrival counters, in all
        and by tenant (a configured tenant's name)."""
        if request.model in self.plan.pools:
            prompt, output = _prompt_and_output(request)
            self.metrics.capacity_arrived_tokens.labels(request.model, "prompt").inc(prompt)
            self.metrics.capacity_arrived_tokens.labels(request.model, "output").inc(output)
            self.metrics.capacity_tenant_tokens.labels(request.model, request.tenant.name).inc(prompt + output)
