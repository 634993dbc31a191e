"""The autoscaling experiment: one day with a 10x diurnal swing of work and an unannounced 3x
spike (the Azure conversation trace warped onto the rate curve, ``diurnal``), whose request mix
drifts from short chat in the morning to long ShareGPT-like requests in the evening
(``day_mix``), served by one GPU pool sized by each replica policy of ``scalers`` in turn, on the
same arrivals.

Sizing: one replica's saturated request rate on the chat trace (``capacity_rps``, measured on its
first 10 minutes) at ``utilisation`` sets the peak: the diurnal peak of work is what
``peak_replicas`` replicas carry; static peak runs that many all day, static mean what the day's
mean work needs. ``shunter`` sizes by token work with the same utilisation against a profile
calibrated to the same measured capacity. The HPA targets requests per second per replica; its
target is swept (``hpa_utilisations`` x the chat capacity) and the report keeps the target that
gives it the best attainment at no more cost than ``shunter`` (the cheapest one when none is as
cheap): the request-rate HPA at its best, not at a target chosen to lose.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduling.autoscaling import AutoscalingConfig, ModelPolicy, PoolModel, ScalingTarget
from scheduling.capacity import CapacityProfile
from scheduling.outcomes import Outcome
from scheduling.tenants import Tier
from simulator.autoscale import ReplicaPolicy, ScaledSimulation, ScaleStats
from simulator.day_mix import DriftingCurve, MixDrift, drift_lengths, mean_work_s
from simulator.diurnal import DAY_S, RateCurve, warp
from simulator.experiments import capacity_rps
from simulator.metrics import RunSummary, group_stats, percentile, summarise
from simulator.observe import Observer
from simulator.perf.hardware import MODELS
from simulator.policies import default_registry
from simulator.pools import DEFAULT_MODEL, build_pool, llm_perf, model_limits
from simulator.records import RequestRecord, SimRequest
from simulator.runner import requests_for
from simulator.scalers import HpaScaler, ShunterScaler, StaticScaler
from simulator.tenancy import MODEL, SLOS, slo_of
from simulator.workloads import TraceItem, window

POLICIES = ("static-peak", "static-mean", "hpa-rps", "shunter")
HPA = "hpa-rps"
PROBE_WINDOW_S = 600.0


@dataclass(frozen=True)
class DaySpec:
    """The experiment's knobs (defaults: ``shunter sim autoscale``)."""

    gpu: str = "a10"
    day_s: float = 7200.0  # simulated seconds that play the 24 h curve (12x compression; 86,400: none)
    peak_replicas: int = 8
    swing: float = 10.0  # peak / trough (of work)
    spike_factor: float = 3.0
    spike_s: float = 180.0
    spike_at: float = 0.35
    long_low: float = 0.05  # share of long requests at 09:00 (``day_mix.MixDrift``)
    long_high: float = 0.6  # ... and at 21:00
    utilisation: float = 0.65  # 4 a10 at 0.65 x saturated capacity, constant load: 99.7 % attainment
    period_s: float = 15.0
    scale_down_window_s: float = 300.0
    max_replicas: int | None = None  # default 3 x peak_replicas (the spike needs about 2.2 x)
    hpa_utilisations: tuple[float, ...] = (0.5, 0.65, 0.8)  # HPA targets swept, x the chat capacity
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


def day_arrivals(items: Sequence[TraceItem], long_lengths: Sequence[tuple[int, int]], spec: DaySpec,
                 capacity: float, profile: CapacityProfile) -> tuple[DriftingCurve, list[SimRequest]]:
    """The day's requests: the chat trace warped onto the request rate of a day whose work follows
    the curve while the mix drifts (``day_mix``); no long lengths: no drift."""
    peak = spec.peak_replicas * capacity * spec.utilisation  # chat-request equivalents per second
    work = RateCurve(peak / spec.swing, peak, spec.day_s, spike_factor=spec.spike_factor, spike_at=spec.spike_at,
                     spike_s=spec.spike_s)
    drift = MixDrift(spec.long_low, spec.long_high) if long_lengths else MixDrift(0.0, 0.0)
    chat = [(i.prompt_tokens, i.output_tokens) for i in items]
    ratio = mean_work_s(long_lengths, profile) / mean_work_s(chat, profile) if long_lengths else 1.0
    curve = DriftingCurve(work, drift, ratio)
    mixed = drift_lengths(warp(items, curve), curve, long_lengths, random.Random(spec.seed + 7919),
                          MODELS[DEFAULT_MODEL].max_context_tokens)
    return curve, requests_for(mixed, None, spec.seed)


def mean_work(curve: DriftingCurve, samples: int = 2000) -> float:
    """The day's mean work, chat-request equivalents per second (without the spike)."""
    work = curve.work
    return sum(work.base_rps(work.day_s * (i + 0.5) / samples) for i in range(samples)) / samples


def policy_names(spec: DaySpec, policies: Sequence[str] = POLICIES) -> list[str]:
    """The runs: ``hpa-rps`` becomes one run per swept target, ``hpa-rps@0.65``."""
    return [n for p in policies for n in ([f"{HPA}@{u:g}" for u in spec.hpa_utilisations] if p == HPA else [p])]


def make_policy(name: str, spec: DaySpec, curve: DriftingCurve, capacity: float,
                profile: CapacityProfile) -> tuple[ReplicaPolicy, int]:
    """The policy called ``name`` (``policy_names``) and its replicas at the start of the day."""
    per_replica = capacity * spec.utilisation
    start = max(1, math.ceil(curve.work.rps(0.0) / per_replica))
    gpu = spec.gpu
    if name == "static-peak":
        return StaticScaler({gpu: spec.peak_replicas}), spec.peak_replicas
    if name == "static-mean":
        mean = max(1, math.ceil(mean_work(curve) / per_replica))
        return StaticScaler({gpu: mean}), mean
    if name.startswith(HPA + "@"):
        target = capacity * float(name.partition("@")[2])
        start = max(1, math.ceil(curve.rps(0.0) / target))
        return HpaScaler(gpu, target, 1, slots_of(spec), scale_down_window_s=spec.scale_down_window_s), start
    if name == "shunter":
        return ShunterScaler(shunter_config(spec, profile)), start
    raise ValueError(f"unknown policy {name!r}")


def shunter_config(spec: DaySpec, profile: CapacityProfile) -> AutoscalingConfig:
    key = PoolModel(spec.gpu, MODEL)
    premium = SLOS[Tier.PREMIUM]
    target = ScalingTarget(key, profile, "r1", 1, slots_of(spec), spec.utilisation)
    model = ModelPolicy(MODEL, queue_wait_p95_s=premium.ttft_s / 2.0, ttft_p95_s=premium.ttft_s)
    return AutoscalingConfig(MappingProxyType({key: target}), MappingProxyType({MODEL: model}),
                             period_s=spec.period_s, scale_down_window_s=spec.scale_down_window_s)


def run_policy(name: str, arrivals: Sequence[SimRequest], spec: DaySpec, curve: DriftingCurve, capacity: float,
               profile: CapacityProfile) -> PolicyResult:
    """One policy's day (``make_policy``), its replicas billed from start to stop."""
    policy, initial = make_policy(name, spec, curve, capacity, profile)
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


def chosen_hpa(results: Sequence[PolicyResult]) -> PolicyResult | None:
    """The HPA run the comparison uses: the best attainment at no more cost than ``shunter``;
    the cheapest HPA run when none is as cheap (or there is no ``shunter`` run)."""
    hpas = [r for r in results if r.policy.startswith(HPA + "@")]
    if not hpas:
        return None
    shunter = next((r for r in results if r.policy == "shunter"), None)
    affordable = [r for r in hpas if shunter is not None and r.cost <= shunter.cost]
    if affordable:
        return max(affordable, key=lambda r: (r.summary.overall.attainment, -r.cost))
    return min(hpas, key=lambda r: r.cost)


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
            progress: Callable[[str], None] | None = None, capacity: float | None = None,
            long_lengths: Sequence[tuple[int, int]] = (),
            jobs: int = 1) -> tuple[DriftingCurve, float, list[PolicyResult]]:
    """Every policy on the same day (the HPA once per swept target, ``policy_names``), ``jobs``
    runs at a time in worker processes; returns the curve, one replica's capacity (req/s; measured
    on the trace's first 10 minutes unless given) and the results in ``policy_names`` order.
    ``long_lengths`` (prompt, output) pairs drift the mix (``day_mix``); none: chat all day."""
    probe = window(list(items), 0.0, PROBE_WINDOW_S)
    if capacity is None:
        if progress:
            progress("capacity probe")
        capacity = capacity_rps(probe, {spec.gpu: 1}, spec.seed)
    profile = calibrated_profile(spec.gpu, probe, capacity)
    curve, arrivals = day_arrivals(items, long_lengths, spec, capacity, profile)
    names = policy_names(spec, policies)
    if jobs <= 1:
        results = []
        for name in names:
            if progress:
                progress(name)
            results.append(run_policy(name, arrivals, spec, curve, capacity, profile))
        return curve, capacity, results
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_policy, name, arrivals, spec, curve, capacity, profile) for name in names]
        out = []
        for name, future in zip(names, futures, strict=True):
            out.append(future.result())
            if progress:
                progress(name)
    return curve, capacity, out
