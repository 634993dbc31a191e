"""Workers as the scheduler sees them: static facts and live signals (``WorkerView``, from the
driver), the load the scheduler itself put on them (``WorkerLoad``), their observed speed
(``ServiceRate``) and the per-model budget that bounds what is dispatched (``ModelLimits``). A
model's load on a worker also holds what the ``prediction`` package keeps per engine: the line of
prompts sent and not yet prefilled, what a prompt costs it, the prefixes its slots hold.

Dispatch budgets keep Triton's queues shallow so that order is decided in the gateway: an LLM
worker takes sequences while their KV claims fit its KV capacity (the profile's
``max_batch_tokens``, or the engine's live KV pool when it reports a smaller one) and its engine
runs at most ``max_sequences`` at once. A sequence's claim is its prompt plus its reserved output
(``max_tokens``), or, for an engine that allocates KV as sequences grow and preempts when it runs
out (``ModelLimits.kv_on_demand``: vLLM, the ``chat`` CPU engine), what it holds averaged over its
life: its prompt plus half its expected output (``kv_claim_tokens``, ``held_output_share``). A
batched model takes rows up to ``rows_per_instance`` times its max batch size per instance. Each
tier fills at most its share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduling.capacity import CapacityProfile
from scheduling.prediction.prefill_cost import PrefillCoefficients, PrefillCost
from scheduling.prediction.prefill_line import PrefillLine
from scheduling.prediction.prefix_reuse import PrefixMemory
from scheduling.requests import Request, RequestKind
from scheduling.tenants import Tier


@dataclass(frozen=True)
class ModelLimits:
    """What bounds one model's dispatch on one worker."""

    name: str
    kind: RequestKind
    max_batch_size: int = 0
    instances: int = 1
    rows_per_instance: int = 2
    tier_share: Mapping[Tier, float] = field(default_factory=dict)
    max_prefill_line_s: float | None = None  # LLM: predicted prompt time queued in the engine, at most
    min_prefill_line_tokens: int = 0  # LLM: ... but the line may always hold this many prompt tokens
    kv_on_demand: bool = False  # LLM: the engine allocates KV as sequences grow and preempts when out of it
    prefix_reuse: bool = False  # LLM: the engine skips the prefill of a prompt prefix a free slot holds

    def share(self, tier: Tier) -> float:
        """Part of a worker's budget that requests of ``tier`` may fill (the rest stays free for
        higher tiers, so a premium request finds room without preempting anything)."""
        return self.tier_share.get(tier, 1.0)

    def prefill_line_bound_s(self, prefill_tokens_per_s: float) -> float | None:
        """The longest predicted prefill line (s) a worker prefilling ``prefill_tokens_per_s`` is
        given: ``max_prefill_line_s``, but never less than ``min_prefill_line_tokens`` of prompt, so
        that a slow engine (a CPU's few hundred tokens/s, where 0.25 s is less than one prompt) is
        not fed one prompt at a time. None: no bound."""
        if self.max_prefill_line_s is None:
            return None
        return max(self.max_prefill_line_s, self.min_prefill_line_tokens / prefill_tokens_per_s)

    @property
    def max_rows_in_flight(self) -> int:
        return max(1, self.rows_per_instance * max(1, self.max_batch_size) * self.instances)


@dataclass(frozen=True)
class WorkerView:
    """A worker's static facts and the live signals the driver last read.

    ``ready_models`` maps a model to the versions READY on the worker; ``kv_total_tokens`` and
    ``kv_used_tokens`` are the LLM engine's live KV pool (None when the engine does not report).
    """

    worker_id: str
    pool: str
    region: str
    profile: CapacityProfile
    ready_models: dict[str, frozenset[int]] = field(default_factory=dict)
    healthy: bool = True
    kv_total_tokens: int | None = None
    kv_used_tokens: int | None = None

    def serves(self, model: str, version: int | None) -> bool:
        versions = self.ready_models.get(model)
        return versions is not None and (version is None or version in versions)


@dataclass
class ServiceRate:
    """Observed cost tokens per second of one model on one worker, smoothed online.

    Busy time accumulates only while the worker has that model's requests in flight, so the rate
    is the worker's throughput when it is working, whatever the arrival rate.
    """

    tokens_per_s: float
    smoothing: float = 0.3
    min_sample_s: float = 0.25
    _tokens: float = 0.0
    _busy_s: float = 0.0

    def record(self, tokens: float, busy_s: float) -> None:
        self._tokens += tokens
        self._busy_s += busy_s
        if self._busy_s >= self.min_sample_s and self._tokens > 0:
            sample = self._tokens / self._busy_s
            self.tokens_per_s += self.smoothing * (sample - self.tokens_per_s)
            self._tokens = self._busy_s = 0.0


@dataclass
class ModelLoad:
    """In-flight work of one model on one worker, with the time it was last updated."""

    requests: int = 0
    tokens: int = 0
    rows: int = 0
    completed_tokens: float = 0.0
    busy_s: float = 0.0
    last_change_s: float | None = None
    line: PrefillLine = field(default_factory=PrefillLine)  # LLM: prompts sent and not yet prefilled
    prefill: PrefillCost = field(default_factory=PrefillCost)  # LLM: what a prompt costs the engine, learned
    prefixes: dict[int | None, PrefixMemory] = field(default_factory=dict)  # per version: what its engine holds

    def prefill_coefficients(self, profile: CapacityProfile) -> PrefillCoefficients:
        """What a prompt costs this engine: learned from its first tokens around the profile's speed."""
        return self.prefill.coefficients(profile.prefill_tokens_per_s)

    def prefix_memory(self, version: int | None) -> PrefixMemory:
        """The prompts held by the engine of ``version`` (None: requests not pinned to a version).
        Versions loaded side by side (a canary, an A/B test) run engines of their own."""
        return self.prefixes.setdefault(version, PrefixMemory())

    def advance(self, now: float) -> None:
        """Add the busy time since the last change (the model had requests in flight)."""
        if self.last_change_s is not None and self.requests > 0:
            self.busy_s += max(0.0, now - self.last_change_s)
        self.last_change_s = now


@dataclass
class WorkerLoad:
    """What the scheduler has dispatched to one worker and not yet seen finish."""

    by_model: dict[str, ModelLoad] = field(default_factory=dict)

    def model(self, name: str) -> ModelLoad:
        return self.by_model.setdefault(name, ModelLoad())

    @property
    def kv_tokens(self) -> int:
        return sum(load.tokens for load in self.by_model.values())

    def add(self, request: Request, now: float, prefill_s: float = 0.0, kv_tokens: int | None = None,
            work_tokens: float = 0.0) -> None:
        """Count ``request`` in flight with its KV claim (``kv_tokens``; default: prompt plus reserved
        output); an LLM prompt joins the worker's prefill line (``prefill_s``: its predicted prefill
        time there, for ``work_tokens``: ``Predictor.prefill``)."""
        load = self.model(request.model)
        load.advance(now)
        load.requests += 1
        load.tokens += _kv_tokens(request, kv_tokens)
        load.rows += request.rows
        if request.kind is RequestKind.LLM:
            load.line.join(request.request_id, prefill_s, now, work_tokens)

    def remove(self, request: Request, now: float, kv_tokens: int | None = None) -> float:
        """Take ``request`` (with the KV claim it was added with) off the worker; return the busy
        seconds accumulated since the last removal (for the service rate)."""
        load = self.model(request.model)
        load.advance(now)
        load.requests = max(0, load.requests - 1)
        load.tokens = max(0, load.tokens - _kv_tokens(request, kv_tokens))
        load.rows = max(0, load.rows - request.rows)
        load.line.leave(request.request_id, now, engine_idle=load.requests == 0)
        busy, load.busy_s = load.busy_s, 0.0
        return busy


def _kv_tokens(request: Request, kv_tokens: int | None) -> int:
    if request.kind is not RequestKind.LLM:
        return 0
    return request.context_tokens if kv_tokens is None else kv_tokens


def kv_claim_tokens(request: Request, output_share: float = 1.0) -> int:
    """KV tokens an LLM request is budgeted for on a worker: its prompt plus ``output_share`` (in
    [0, 1]) of its reserved output; 1.0 for an engine that reserves KV for ``max_tokens`` up front."""
    return request.prefill_tokens + math.ceil(request.max_output_tokens * min(1.0, max(0.0, output_share)))


def held_output_share(output_ratio: float) -> float:
    """``output_share`` for an engine that allocates KV on demand, given the observed share of
    ``max_tokens`` that sequences generate: a sequence holds its prompt plus what it generated so
    far, so over its life it holds its prompt plus half its output on average, and the claims in
    flight sum to what the engine holds (Little's law). Peaks above that are the engine's to absorb
    by preemption (lowest tier first); the driver's live ``kv_used_tokens`` bounds it too."""
    return 0.5 * min(1.0, max(0.0, output_ratio))


def kv_capacity_tokens(view: WorkerView) -> int:
    """KV tokens the worker may hold: its profile's bound, or the engine's live pool if smaller."""
    if view.kv_total_tokens:
        return min(view.profile.max_batch_tokens, view.kv_total_tokens)
    return view.profile.max_batch_tokens


def budget_fits(request: Request, view: WorkerView, load: WorkerLoad, limits: ModelLimits,
                output_share: float = 1.0) -> bool:
    """True when dispatching ``request`` (an LLM request claiming ``kv_claim_tokens(request,
    output_share)``) keeps the worker within its dispatch budget.

    Requests of a tier fill at most their tier's share of it. A request larger than a whole
    budget is let through on an otherwise idle worker (for that model), so that it is served
    rather than starved.
    """
    model_load = load.model(request.model)
    share = limits.share(request.tier)
    if request.kind is RequestKind.LLM:
        if model_load.requests >= max(1, int(view.profile.max_sequences * share)):
            return False
        used = max(load.kv_tokens, view.kv_used_tokens or 0)
        capacity = kv_capacity_tokens(view) * share
        return used + kv_claim_tokens(request, output_share) <= capacity or used == 0
    rows_capacity = max(1, int(limits.max_rows_in_flight * share))
    return model_load.rows + request.rows <= rows_capacity or model_load.rows == 0


def headroom(request: Request, view: WorkerView, load: WorkerLoad, limits: ModelLimits,
             output_share: float = 1.0) -> float:
    """Share of the worker's budget for this model left after placing ``request``, in [0, 1]."""
    if request.kind is RequestKind.LLM:
        capacity = kv_capacity_tokens(view)
        used = max(load.kv_tokens, view.kv_used_tokens or 0) + kv_claim_tokens(request, output_share)
    else:
        capacity = limits.max_rows_in_flight
        used = load.model(request.model).rows + request.rows
    return min(1.0, max(0.0, 1.0 - used / capacity))
