"""Summaries of one simulated run: latency percentiles, SLO attainment and goodput, fairness,
GPU utilisation and cost, overall and per tier and tenant.

Definitions (the metrics of ``docs/simulation.md``, "The model"): a request meets its SLO when it
completed with TTFT and TPOT within its tier's objectives; attainment is the share of *all*
requests (rejected and expired ones count as misses) that met it; SLO goodput is SLO-meeting
requests per second of the arrival span; cost per million tokens within SLO is the pool's price
over the run divided by the prompt plus output tokens of the requests that met their SLO.
Preemptions are the LLM engines' (a sequence evicted to free KV blocks, recomputed later; one
request may be preempted more than once). Percentiles are nearest-rank over completed requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduling.outcomes import Outcome
from simulator.driver import SimResult
from simulator.llm_worker import LlmWorker
from simulator.records import RequestRecord

PERCENTILES = (50, 90, 99)


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class GroupStats:
    requests: int
    completed: int
    rejected: int
    expired: int
    attainment: float
    goodput_rps: float
    ttft_s: dict[str, float | None]
    tpot_s: dict[str, float | None]
    tokens_within_slo: int


def group_stats(records: Iterable[RequestRecord], span_s: float) -> GroupStats:
    records = list(records)
    done = [r for r in records if r.outcome is Outcome.COMPLETED]
    met = [r for r in records if r.met_slo]
    ttfts = [r.ttft_s for r in done if r.ttft_s is not None]
    tpots = [r.tpot_s for r in done if r.tpot_s is not None and r.generated > 1]
    return GroupStats(
        requests=len(records), completed=len(done),
        rejected=sum(r.outcome is Outcome.REJECTED for r in records),
        expired=sum(r.outcome is Outcome.EXPIRED for r in records),
        attainment=len(met) / len(records) if records else 1.0,
        goodput_rps=len(met) / span_s if span_s > 0 else 0.0,
        ttft_s={f"p{p}": percentile(ttfts, p) for p in PERCENTILES},
        tpot_s={f"p{p}": percentile(tpots, p) for p in PERCENTILES},
        tokens_within_slo=sum(r.prefill_tokens + r.generated for r in met))


def _grouped(records: list[RequestRecord], key: Callable[[RequestRecord], str],
             span_s: float) -> dict[str, GroupStats]:
    groups: dict[str, list[RequestRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return {name: group_stats(groups[name], span_s) for name in sorted(groups)}


@dataclass(frozen=True)
class RunSummary:
    overall: GroupStats
    by_tier: dict[str, GroupStats]
    by_tenant: dict[str, GroupStats]
    span_s: float
    makespan_s: float
    gpu_utilisation: float
    pool_cost_per_hour: float
    cost_per_million_slo_tokens: float | None
    jain_index: float | None
    max_weighted_service_gap: float | None
    events: int
    preemptions: int = 0
    recomputed_tokens: int = 0  # prompt plus generated tokens prefilled again after preemptions


def summarise(result: SimResult, pool_cost_per_hour: float) -> RunSummary:
    """Summarise ``result``; the span is the arrival span (at least 1 s), the cost covers the makespan."""
    records = sorted(result.records, key=lambda r: r.request_id)
    arrivals = [r.arrival_s for r in records]
    span_s = max(1.0, max(arrivals) - min(arrivals)) if arrivals else 1.0
    overall = group_stats(records, span_s)
    busy = sum(w.engine.busy_s for w in result.workers)
    capacity_s = len(result.workers) * result.makespan_s
    cost = pool_cost_per_hour * result.makespan_s / 3600.0
    per_m = cost / (overall.tokens_within_slo / 1e6) if overall.tokens_within_slo else None
    engines = [w.engine for w in result.workers if isinstance(w.engine, LlmWorker)]
    return RunSummary(
        overall=overall, by_tier=_grouped(records, lambda r: r.tier.value, span_s),
        by_tenant=_grouped(records, lambda r: r.tenant, span_s), span_s=span_s, makespan_s=result.makespan_s,
        gpu_utilisation=busy / capacity_s if capacity_s > 0 else 0.0, pool_cost_per_hour=pool_cost_per_hour,
        cost_per_million_slo_tokens=per_m, jain_index=result.fairness.mean_jain,
        max_weighted_service_gap=result.fairness.max_gap, events=result.events,
        preemptions=sum(e.preemptions for e in engines), recomputed_tokens=sum(e.recomputed_tokens for e in engines))
