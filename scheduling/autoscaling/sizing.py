"""Sizing terms of one model: token work per replica of each pool, the latency and burn-rate
raises, and the KV floor. Each returns numbers; ``allocation`` turns them into replica counts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduling.autoscaling.types import AutoscalingConfig, ModelPolicy, ModelSignals, PoolSignals, ScalingTarget

_EPS = 1e-9


@dataclass(frozen=True)
class Demand:
    """A model's token demand as rates: arriving tokens per second plus the pending backlog
    spread over ``backlog_drain_s``."""

    prompt_tokens_per_s: float
    output_tokens_per_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.prompt_tokens_per_s + self.output_tokens_per_s

    def scaled(self, factor: float) -> Demand:
        return Demand(self.prompt_tokens_per_s * factor, self.output_tokens_per_s * factor)


def demand_of(signals: ModelSignals, policy: ModelPolicy) -> Demand:
    """Arriving plus pending token work of one model, in tokens per second."""
    drain_s = policy.backlog_drain_s
    return Demand(signals.arriving_prompt_tokens_per_s + signals.pending_prompt_tokens / drain_s,
                  signals.arriving_output_tokens_per_s + signals.pending_output_tokens / drain_s)


def replica_tokens_per_s(target: ScalingTarget, pool: PoolSignals, demand: Demand) -> float:
    """Tokens per second one replica of ``target`` carries at its objective: the demand's mix of
    prompt and output tokens at the replica's speeds (prefill corrected by the learned speed),
    times ``target_utilisation``. With no demand, an even mix prices the replica."""
    prefill = pool.prefill_tokens_per_s or target.profile.prefill_tokens_per_s
    decode = target.profile.decode_tokens_per_s
    total = demand.tokens_per_s
    prompt_share = demand.prompt_tokens_per_s / total if total > _EPS else 0.5
    seconds_per_token = prompt_share / prefill + (1.0 - prompt_share) / decode
    return target.target_utilisation / seconds_per_token


def cost_per_token(target: ScalingTarget, pool: PoolSignals, demand: Demand) -> float:
    """Dollars per token at the objective on one replica of ``target``."""
    return target.cost_per_hour / 3600.0 / replica_tokens_per_s(target, pool, demand)


def latency_ratio(signals: ModelSignals, policy: ModelPolicy) -> tuple[float, str]:
    """The worst of queue-wait and TTFT p95 over their objectives (1.0 when nothing measured),
    and which one it was (``queue_wait`` or ``ttft``)."""
    queue = (signals.queue_wait_p95_s or 0.0) / policy.queue_wait_p95_s
    ttft = (signals.ttft_p95_s or 0.0) / policy.ttft_p95_s
    return (queue, "queue_wait") if queue >= ttft else (ttft, "ttft")


def latency_replicas(current: int, ratio: float, config: AutoscalingConfig) -> int:
    """HPA's rule on the latency ratio: ``ceil(current x ratio)`` when the ratio is over
    ``1 + tolerance``, else 0 (no requirement; nor at zero: latency cannot size a cold model)."""
    if current == 0 or ratio <= 1.0 + config.tolerance:
        return 0
    return math.ceil(current * min(ratio, config.max_up_factor) - _EPS)


def burn_replicas(token_replicas: int, current: int, signals: ModelSignals, config: AutoscalingConfig) -> int:
    """The multi-window burn-rate rule: when both windows burn the error budget faster than the
    threshold, the token work is taken to be under-estimated by ``burn_step``: the count is
    ``token_replicas x (1 + burn_step)``, at least one more than ``current``; else 0 (no
    requirement). Relative to the token work, not to the current count, so a burn that outlasts
    the incident (the long window) does not compound."""
    threshold = config.burn_rate_threshold
    if current == 0 or signals.burn_rate_short <= threshold or signals.burn_rate_long <= threshold:
        return 0
    return max(current + 1, math.ceil(token_replicas * (1.0 + config.burn_step) - _EPS))


def kv_replicas(pool: PoolSignals, config: AutoscalingConfig) -> int:
    """Replicas of one pool the live KV use needs at ``kv_target_use`` (a floor: scaling below it
    would evict or preempt sequences)."""
    if pool.ready == 0 or pool.kv_used_fraction <= config.kv_target_use:
        return 0
    return math.ceil(pool.ready * pool.kv_used_fraction / config.kv_target_use - _EPS)


def up_limit(current: int, config: AutoscalingConfig) -> int:
    """The most replicas one step may reach from ``current`` (HPA's scale-up policy)."""
    return max(math.ceil(current * config.max_up_factor - _EPS), current + config.max_up_replicas)
