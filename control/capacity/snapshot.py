"""The policy's ``Snapshot`` from the gateways' signals (``signals.py``) and the replica counts.

Pure given its inputs: the reading history, the replica counts per (pool, model), when each
model last had work, and ``now_s``. Rates and p95s are taken over ``rate_window_s`` (like
PromQL's ``rate(x[1m])``: 4 controller periods), the burn rates over the policy's short and long
windows. Arriving tokens of a non-LLM model are multiplied by its ``token_cost_factor`` (the
policy counts the core's cost tokens); the pending and in-flight gauges already are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from control.capacity.signals import SignalHistory, Window, burn_rate, pool_of_worker, quantile
from scheduling.autoscaling import AutoscalingConfig, ModelSignals, PoolModel, PoolSignals, Snapshot
from settings.stack import StackConfig


@dataclass(frozen=True)
class ReplicaCounts:
    ready: int = 0
    starting: int = 0
    draining: int = 0


def rate_window_s(config: AutoscalingConfig) -> float:
    return 4.0 * config.period_s


def active_models(history: SignalHistory, config: AutoscalingConfig) -> set[str]:
    """Models with work now: held, pending or in-flight tokens, or requests in the rate window."""
    newest = history.newest
    if newest is None:
        return set()
    window = history.window(rate_window_s(config))
    active = {m for m, n in newest.held.items() if n > 0}
    active |= {m for (_, m, _), n in newest.pending.items() if n > 0}
    active |= {m for (_, m), n in newest.inflight.items() if n > 0}
    active |= {m for m in config.models if sum(window.requests(m).values()) > 0}
    return active


def build_snapshot(history: SignalHistory, config: AutoscalingConfig, stack: StackConfig,
                   counts: Mapping[PoolModel, ReplicaCounts], idle_s: Mapping[str, float],
                   error_budget: float) -> Snapshot:
    """The snapshot of every configured model and (pool, model); see the module docstring."""
    window = history.window(rate_window_s(config))
    short = history.window(config.burn_short_window_s)
    long = history.window(config.burn_long_window_s)
    models = {m: _model_signals(m, window, short, long, config, stack, idle_s.get(m, 0.0), error_budget)
              for m in config.models}
    pools = {key: _pool_signals(key, history, stack, counts.get(key, ReplicaCounts())) for key in config.targets}
    return Snapshot(MappingProxyType(models), MappingProxyType(pools))


def _model_signals(model: str, window: Window, short: Window, long: Window, config: AutoscalingConfig,
                   stack: StackConfig, idle_s: float, error_budget: float) -> ModelSignals:
    newest = window.newest
    pending = {kind: sum(n for (_, m, k), n in newest.pending.items() if m == model and k == kind)
               for kind in ("prompt", "output")}
    ttft_objective_s = config.models[model].ttft_p95_s
    return ModelSignals(
        model,
        arriving_prompt_tokens_per_s=window.token_rate(model, "prompt"),
        arriving_output_tokens_per_s=window.token_rate(model, "output"),
        pending_prompt_tokens=pending["prompt"],
        pending_output_tokens=pending["output"],
        queue_wait_p95_s=quantile(window.queue_wait(model), 0.95),
        ttft_p95_s=quantile(window.ttft(model), 0.95),
        burn_rate_short=burn_rate(short, model, ttft_objective_s, error_budget),
        burn_rate_long=burn_rate(long, model, ttft_objective_s, error_budget),
        held_requests=int(newest.held.get(model, 0.0)),
        held_regions=newest.held_in(model),
        idle_s=idle_s,
        tenant_token_share=MappingProxyType(window.tenant_shares(model)),
    )


def _pool_signals(key: PoolModel, history: SignalHistory, stack: StackConfig, counts: ReplicaCounts) -> PoolSignals:
    newest = history.newest
    if newest is None:
        return PoolSignals(key, counts.ready, counts.starting, counts.draining)
    pools = [p.name for p in stack.pools]
    speeds = [v for (worker, m), values in newest.prefill.items() if m == key.model
              and pool_of_worker(worker, pools) == key.pool for v in values]
    kv_used = kv_total = 0.0
    if speeds:  # an LLM served on this pool: its workers' KV pools
        for (worker, state), value in newest.kv.items():
            if pool_of_worker(worker, pools) == key.pool:
                kv_used += value if state == "used" else 0.0
                kv_total += value if state == "total" else 0.0
    return PoolSignals(
        key, counts.ready, counts.starting, counts.draining,
        in_flight_tokens=newest.inflight.get((key.pool, key.model), 0.0),
        kv_used_fraction=kv_used / kv_total if kv_total > 0 else 0.0,
        prefill_tokens_per_s=sum(speeds) / len(speeds) if speeds else None,
    )
