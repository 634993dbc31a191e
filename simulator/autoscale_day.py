"""The autoscaling experiment: one day with a 10x diurnal swing and an unannounced 3x spike (the
Azure conversation trace warped onto the rate curve, ``diurnal``), served by one GPU pool sized by
each replica policy of ``scalers`` in turn, on the same arrivals.

Sizing: one replica's saturated request rate on the trace (``capacity_rps``, measured on its first
10 minutes) at ``utilisation`` sets the peak: the diurnal peak is what ``peak_replicas`` replicas
carry; static peak runs that many all day, static mean what the day's mean rate needs. The HPA
targets ``capacity x utilisation`` requests per second per replica; ``shunter`` sizes by token work
with the same utilisation against a profile calibrated to the same measured capacity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduling.autoscaling import AutoscalingConfig, ModelPolicy, PoolModel, ScalingTarget
from scheduling.capacity import CapacityProfile
from scheduling.outcomes import Outcome
from scheduling.tenants import Tier
from simulator.autoscale import ReplicaPolicy, ScaledSimulation, ScaleStats
from simulator.diurnal import DAY_S, RateCurve, warp
from simulator.experiments import capacity_rps
from simulator.metrics import RunSummary, group_stats, percentile, summarise
from simulator.observe import Observer
from simulator.policies import default_registry
from simulator.pools import build_pool, llm_perf, model_limits
from simulator.records import RequestRecord, SimRequest
from simulator.runner import requests_for
from simulator.scalers import HpaScaler, ShunterScaler, StaticScaler
from simulator.tenancy import MODEL, SLOS, slo_of
from simulator.workloads import TraceItem, window

POLICIES = ("static-peak", "static-mean", "hpa-rps", "shunter")
PROBE_WINDOW_S = 600.0


@dataclass(frozen=True)
class DaySpec:
    """The experiment's knobs (defaults: ``shunter sim autoscale``)."""

    gpu: str = "a10"
    day_s: float = 7200.0  # simulated seconds that play the 24 h curve (12x compression)
    peak_replicas: int = 8
    swing: float = 10.0  # peak / trough
    spike_factor: float = 3.0
    spike_s: float = 180.0
    spike_at: float = 0.35
    utilisation: float = 0.65  # 4 a10 at 0.65 x saturated capacity, constant load: 99.7 % attainment
    period_s: float = 15.0
    scale_down_window_s: float = 300.0
    max_replicas: int | None = None  # default 3 x peak_replicas (the spike needs about 2.2 x)
    seed: int = 0


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    summary: RunSummary
    gpu_hours: float
    gpu_hours_per_day: float  # scaled to a 24 h day
    cost: float
    cost_per_day: float
    scale_ups: int
    scale_downs: int
    cold_waited: int  # requests that ran on a replica still cold when they arrived
    cold_wait_p50_s: float | None
    cold_wait_p95_s: float | None
    spike_attainment: dict[str, float]
    reasons: dict[str, int]
    stats: ScaleStats
    dispatched_not_completed: int = 0  # 0 when no scale-down cut a request's work


def calibrated_profile(gpu: str, items: Sequence[TraceItem], capacity: float) -> CapacityProfile:
    """The GPU's profile with its decode speed set so that the trace's token mix runs at the
    measured ``capacity`` (requests per second): ``1 / tokens_per_s = p / prefill + o / decode``."""
    profile = llm_perf(gpu).profile()
    prompt = sum(i.prompt_tokens for i in items) / len(items)
    output = sum(i.output_tokens for i in items) / len(items)
    tokens_per_s = capacity * (prompt + output)
    share = prompt / (prompt + output)
    rest = 1.0 / tokens_per_s - share / profile.prefill_tokens_per_s
    decode = (1.0 - share) / rest if rest > 0 else profile.decode_tokens_per_s
    return replace(profile, decode_tokens_per_s=decode)


def slots_of(spec: DaySpec) -> int:
    return spec.max_replicas if spec.max_replicas is not None else 3 * spec.peak_replicas


def day_arrivals(items: Sequence[TraceItem], spec: DaySpec, capacity: float) -> tuple[RateCurve, list[SimRequest]]:
    peak = spec.peak_replicas * capacity * spec.utilisation
    curve = RateCurve(peak / spec.swing, peak, spec.day_s, spike_factor=spec.spike_factor, spike_at=spec.spike_at,
                      spike_s=spec.spike_s)
    return curve, requests_for(warp(items, curve), None, spec.seed)


def mean_rps(curve: RateCurve, samples: int = 2000) -> float:
    return sum(curve.base_rps(curve.day_s * (i + 0.5) / samples) for i in range(samples)) / samples


def policies_for(spec: DaySpec, curve: RateCurve, capacity: float,
                 profile: CapacityProfile) -> dict[str, Callable[[], tuple[ReplicaPolicy, int]]]:
    """Each policy's factory: (policy, replicas at the start of the day)."""
    per_replica = capacity * spec.utilisation
    mean = max(1, math.ceil(mean_rps(curve) / per_replica))
    start = max(1, math.ceil(curve.rps(0.0) / per_replica))
    gpu = spec.gpu
    config = shunter_config(spec, profile)
    return {
        "static-peak": lambda: (StaticScaler({gpu: spec.peak_replicas}), spec.peak_replicas),
        "static-mean": lambda: (StaticScaler({gpu: mean}), mean),
        "hpa-rps": lambda: (HpaScaler(gpu, per_replica, 1, slots_of(spec),
                                      scale_down_window_s=spec.scale_down_window_s), start),
        "shunter": lambda: (ShunterScaler(config), start),
    }


def shunter_config(spec: DaySpec, profile: CapacityProfile) -> AutoscalingConfig:
    key = PoolModel(spec.gpu, MODEL)
    premium = SLOS[Tier.PREMIUM]
    target = ScalingTarget(key, profile, "r1", 1, slots_of(spec), spec.utilisation)
    model = ModelPolicy(MODEL, queue_wait_p95_s=premium.ttft_s / 2.0, ttft_p95_s=premium.ttft_s)
    return AutoscalingConfig(MappingProxyType({key: target}), MappingProxyType({MODEL: model}),
                             period_s=spec.period_s, scale_down_window_s=spec.scale_down_window_s)


def run_policy(name: str, factory: Callable[[], tuple[ReplicaPolicy, int]], arrivals: Sequence[SimRequest],
               spec: DaySpec, curve: RateCurve) -> PolicyResult:
    policy, initial = factory()
    registry = default_registry().get("shunter")
    scheduler = registry.build(model_limits(), spec.seed)
    slots = build_pool({spec.gpu: slots_of(spec)}, lazy_timeouts=registry.lazy_timeouts)
    perf = llm_perf(spec.gpu)
    observer = Observer(MODEL, Tier.PREMIUM, spec.period_s)
    sim = ScaledSimulation(scheduler, slots, arrivals, slo_of, policy, {spec.gpu: initial}, observer, spec.period_s,
                           {spec.gpu: perf.cold_start_s()}, {spec.gpu: perf.gpu.cost_per_hour})
    result = sim.run()
    stats = sim.stats
    summary = summarise(result, 0.0)
    gpu_hours = sum(stats.replica_s.values()) / 3600.0
    waited = _cold_waits(result.records, stats)
    spike = [r for r in result.records if curve.spike_start_s <= r.arrival_s < curve.spike_end_s]
    spike_tiers = {t.value: group_stats([r for r in spike if r.tier is t], 1.0).attainment for t in Tier}
    per_day = DAY_S / spec.day_s
    return PolicyResult(name, summary, gpu_hours, gpu_hours * per_day, stats.cost, stats.cost * per_day,
                        stats.scale_ups, stats.scale_downs, len(waited), percentile(waited, 50),
                        percentile(waited, 95), spike_tiers,
                        dict(policy.reasons) if isinstance(policy, ShunterScaler) else {}, stats,
                        sum(r.dispatch_s is not None and r.outcome is not Outcome.COMPLETED for r in result.records))


def _cold_waits(records: Sequence[RequestRecord], stats: ScaleStats) -> list[float]:
    """Queue waits of the requests dispatched to a replica that became ready after they arrived
    (they waited, at least partly, for its cold start)."""
    waits = []
    for r in records:
        if r.dispatch_s is None or not r.worker_id:
            continue
        ready = [t for t in stats.ready_at.get(r.worker_id, []) if t <= r.dispatch_s]
        if ready and ready[-1] > r.arrival_s and ready[-1] > 0:
            waits.append(r.dispatch_s - r.arrival_s)
    return waits


def run_day(items: Sequence[TraceItem], spec: DaySpec, policies: Sequence[str] = POLICIES,
            progress: Callable[[str], None] | None = None,
            capacity: float | None = None) -> tuple[RateCurve, float, list[PolicyResult]]:
    """Every policy on the same day; returns the curve, one replica's capacity (req/s; measured on
    the trace's first 10 minutes unless given) and the results."""
    probe = window(list(items), 0.0, PROBE_WINDOW_S)
    if capacity is None:
        if progress:
            progress("capacity probe")
        capacity = capacity_rps(probe, {spec.gpu: 1}, spec.seed)
    curve, arrivals = day_arrivals(items, spec, capacity)
    factories = policies_for(spec, curve, capacity, calibrated_profile(spec.gpu, probe, capacity))
    results = []
    for name in policies:
        if progress:
            progress(name)
        results.append(run_policy(name, factories[name], arrivals, spec, curve))
    return curve, capacity, results
