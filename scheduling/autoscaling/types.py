"""The capacity controller's vocabulary: its configuration, the signal snapshot it reads, its own
state between periods and the frozen decisions it emits. Pure data; the policy is
``scheduling.autoscaling.policy.decide``.

Keys are ``PoolModel(pool, model)``: a replica is one worker of ``pool`` serving ``model``.
Times are seconds on the caller's clock (``now_s``); rates are per second; token counts are the
core's cost tokens (non-LLM models convert with their ``token_cost_factor`` before they get here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from scheduling.capacity import CapacityProfile


class Action(StrEnum):
    """What a decision does to one (pool, model); a metrics label."""

    UP = "up"
    DOWN = "down"
    HOLD = "hold"
    TO_ZERO = "to_zero"
    FROM_ZERO = "from_zero"


class Reason(StrEnum):
    """Why the desired count is what it is (the binding term); a low-cardinality metrics label."""

    TOKEN_WORK = "token_work"  # sized by pending + arriving token work
    QUEUE_WAIT = "queue_wait"  # queue-wait p95 over its objective
    TTFT = "ttft"  # TTFT p95 over its objective
    BURN_RATE = "burn_rate"  # error budget burning too fast on both windows
    KV_PRESSURE = "kv_pressure"  # live KV use needs more replicas than the token work
    HELD_REQUESTS = "held_requests"  # requests held at zero: start one
    IDLE = "idle"  # idle past scale_to_zero.idle_s: unload
    MIN_REPLICAS = "min_replicas"  # the warm minimum binds
    MAX_REPLICAS = "max_replicas"  # the per-(pool, model) maximum binds
    MODEL_CAP = "model_cap"  # the model's replica or $/h cap binds
    TENANT_CAP = "tenant_cap"  # a tenant's $/h cap binds
    OVERRIDE = "override"  # a live operator override sets the count
    STABILISING = "stabilising"  # a lower count waits out scale_down_window_s
    STEADY = "steady"  # within tolerance of the current count


@dataclass(frozen=True)
class PoolModel:
    """One (pool, model) pair: the unit the controller sizes."""

    pool: str
    model: str

    def __str__(self) -> str:
        return f"{self.pool}/{self.model}"


@dataclass(frozen=True)
class ScalingTarget:
    """Bounds and the replica model of one (pool, model).

    ``profile`` is the pool's capacity profile (speeds, KV tokens, cost per hour); a replica is
    sized to run at ``target_utilisation`` of its profile's token throughput, so that queueing
    stays within the objectives. ``region`` is the pool's region (residency of held work).
    """

    key: PoolModel
    profile: CapacityProfile
    region: str
    min_replicas: int
    max_replicas: int
    target_utilisation: float = 0.75

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"{self.key}: need 0 <= min_replicas <= max_replicas")
        if not 0 < self.target_utilisation <= 1:
            raise ValueError(f"{self.key}: target_utilisation must be in (0, 1]")

    @property
    def cost_per_hour(self) -> float:
        return self.profile.cost_per_hour


@dataclass(frozen=True)
class ModelPolicy:
    """Per model, over all its pools: objectives, scale-to-zero and the model's cost caps
    (``None``: no cap). ``backlog_drain_s``: the pending backlog is sized to drain within this
    time on top of the arriving work (shorter asks for more replicas at once; a replica takes a
    cold start to help, so much shorter than one only overshoots)."""

    model: str
    queue_wait_p95_s: float
    ttft_p95_s: float
    scale_to_zero: bool = False
    idle_s: float = 600.0
    max_replicas: int | None = None
    max_cost_per_hour: float | None = None
    backlog_drain_s: float = 60.0

    def __post_init__(self) -> None:
        if min(self.queue_wait_p95_s, self.ttft_p95_s, self.backlog_drain_s) <= 0 or self.idle_s < 0:
            raise ValueError(f"model {self.model}: objectives and backlog_drain_s must be > 0, idle_s >= 0")


@dataclass(frozen=True)
class AutoscalingConfig:
    """The controller's configuration (``config/capacity.yaml`` read by ``settings.capacity``).

    ``scale_down_window_s``: a lower count is applied only when every recommendation of that long
    asked for it (the HPA's stabilisation). ``tolerance``: a change within this fraction of the
    current count is not made. One step up is at most ``max(current * max_up_factor,
    current + max_up_replicas)``. ``burn_rate_threshold``: both windows' burn rates above it
    raise the count by ``burn_step`` (a fraction, at least one replica). Tenant caps bound a
    tenant's token share of each model's planned $/h (``tenant_max_cost_per_hour``) or replicas
    (``tenant_max_replicas``), summed over models.
    """

    targets: Mapping[PoolModel, ScalingTarget]
    models: Mapping[str, ModelPolicy]
    tenant_max_cost_per_hour: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    tenant_max_replicas: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    period_s: float = 15.0
    scale_down_window_s: float = 300.0
    tolerance: float = 0.1
    max_up_factor: float = 2.0
    max_up_replicas: int = 4
    burn_short_window_s: float = 300.0
    burn_long_window_s: float = 3600.0
    burn_rate_threshold: float = 2.0
    burn_step: float = 0.25
    kv_target_use: float = 0.85

    def __post_init__(self) -> None:
        if min(self.period_s, self.max_up_factor) <= 0 or self.scale_down_window_s < 0:
            raise ValueError("period_s and max_up_factor must be > 0, scale_down_window_s >= 0")
        if not 0 <= self.tolerance < 1 or not 0 < self.kv_target_use <= 1:
            raise ValueError("tolerance must be in [0, 1), kv_target_use in (0, 1]")
        for key in self.targets:
            if key.model not in self.models:
                raise ValueError(f"{key}: model has no ModelPolicy")

    def pools_of(self, model: str) -> tuple[ScalingTarget, ...]:
        """The targets serving ``model``, in a stable order (pool name)."""
        return tuple(sorted((t for t in self.targets.values() if t.key.model == model), key=lambda t: t.key.pool))


@dataclass(frozen=True)
class ModelSignals:
    """What the gateway measured for one model over the last period (all pools together: the
    fair queue holds a model's backlog before placement picks a pool).

    ``*_p95_s`` are ``None`` when nothing was measured (the driver chooses whose: the simulator
    takes the objective tier's requests, and counts the age of those still queued). Burn rates
    are the error-budget burn rate (misses / allowed misses) over the short and long window.
    ``held_requests`` wait for capacity (the model is at zero); ``held_regions`` are the regions
    every held request may run in (empty: any).
    ``tenant_token_share`` splits the model's token demand by tenant (for tenant cost caps).
    """

    model: str
    arriving_prompt_tokens_per_s: float = 0.0
    arriving_output_tokens_per_s: float = 0.0
    pending_prompt_tokens: float = 0.0
    pending_output_tokens: float = 0.0
    queue_wait_p95_s: float | None = None
    ttft_p95_s: float | None = None
    burn_rate_short: float = 0.0
    burn_rate_long: float = 0.0
    held_requests: int = 0
    held_regions: frozenset[str] = frozenset()
    idle_s: float = 0.0
    tenant_token_share: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def has_work(self) -> bool:
        return (self.held_requests > 0 or self.pending_prompt_tokens + self.pending_output_tokens > 0
                or self.arriving_prompt_tokens_per_s + self.arriving_output_tokens_per_s > 0)


@dataclass(frozen=True)
class PoolSignals:
    """One (pool, model): its replicas and what they hold now.

    ``ready`` replicas take traffic, ``starting`` ones boot/load/warm, ``draining`` ones finish
    their work and take none (not counted as capacity). ``in_flight_tokens``: KV tokens held;
    ``kv_used_fraction``: their share of the ready replicas' KV pool. ``prefill_tokens_per_s``:
    the speed the core has learned on this pool (``None``: the profile's prior)."""

    key: PoolModel
    ready: int = 0
    starting: int = 0
    draining: int = 0
    in_flight_tokens: float = 0.0
    kv_used_fraction: float = 0.0
    prefill_tokens_per_s: float | None = None

    @property
    def current(self) -> int:
        """Replicas counted as capacity: ready plus starting."""
        return self.ready + self.starting


@dataclass(frozen=True)
class Snapshot:
    """Everything the policy reads at one tick."""

    models: Mapping[str, ModelSignals]
    pools: Mapping[PoolModel, PoolSignals]

    def model(self, name: str) -> ModelSignals:
        return self.models.get(name) or ModelSignals(name)

    def pool(self, key: PoolModel) -> PoolSignals:
        return self.pools.get(key) or PoolSignals(key)


@dataclass(frozen=True)
class Override:
    """An operator's expiring replica count for one (pool, model): a floor that may exceed every
    cap, live while ``now_s < expires_at_s``."""

    key: PoolModel
    replicas: int
    expires_at_s: float
    reason: str
    actor: str = "operator"

    def __post_init__(self) -> None:
        if self.replicas < 0:
            raise ValueError(f"{self.key}: override replicas must be >= 0")

    def live(self, now_s: float) -> bool:
        return now_s < self.expires_at_s


@dataclass(frozen=True)
class ScaleDecision:
    """The controller's answer for one (pool, model) at one tick.

    ``current`` = ready + starting when decided; ``recommended`` = the policy's count before the
    stabilisation window; ``numbers`` the terms behind it (``token_work_replicas``,
    ``latency_replicas``, ``kv_replicas``, ...); ``capped_by_budget``: a cap (max_replicas, the
    model's or a tenant's) held the count below what the signals asked for."""

    key: PoolModel
    current: int
    desired: int
    recommended: int
    action: Action
    reason: Reason
    numbers: Mapping[str, float]
    capped_by_budget: bool = False
    at_s: float = 0.0


@dataclass(frozen=True)
class ControllerState:
    """The controller's memory between ticks: recent recommendations per key (for the
    scale-down window), the last decision per key, and operator overrides."""

    history: Mapping[PoolModel, tuple[tuple[float, int], ...]] = field(default_factory=lambda: MappingProxyType({}))
    last: Mapping[PoolModel, ScaleDecision] = field(default_factory=lambda: MappingProxyType({}))
    overrides: Mapping[PoolModel, Override] = field(default_factory=lambda: MappingProxyType({}))

    def with_override(self, override: Override) -> ControllerState:
        """This state with ``override`` set (replacing any on the same key)."""
        return ControllerState(self.history, self.last, MappingProxyType({**self.overrides, override.key: override}))

    def without_override(self, key: PoolModel) -> ControllerState:
        return ControllerState(self.history, self.last,
                               MappingProxyType({k: v for k, v in self.overrides.items() if k != key}))
