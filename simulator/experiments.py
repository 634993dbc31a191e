"""The experiments behind the proof targets, as functions of their inputs (traces, pools, seeds),
each returning plain data for the reports. Long experiments accept a ``progress`` callback."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.tenants import Tenant, Tier
from scheduling.workers import ModelLimits
from simulator.driver import SchedulerLike
from simulator.metrics import RunSummary
from simulator.policies import PolicyRegistry, PolicySpec
from simulator.pools import mix_cost_per_hour
from simulator.records import SimRequest
from simulator.runner import RunSpec, requests_for, simulate
from simulator.tenancy import TenantShare, make_request
from simulator.workloads import TraceItem, mean_rate, scale_load

Progress = Callable[[str], None]
GOODPUT_ATTAINMENT = 0.9  # DistServe: highest rate with ≥ 90 % of requests within SLO


def _quiet(_: str) -> None:
    """No progress output."""


def capacity_rps(items: Sequence[TraceItem], mix: Mapping[str, int], seed: int = 0) -> float:
    """Requests per second the pool sustains on this request mix, saturated: every request arrives
    at once (one standard tenant, no deadline, an unbounded FIFO queue), in trace order; the
    capacity is the completion rate over the middle 60 % of the makespan (start-up and drain cut;
    the whole makespan when nothing finishes there, a short trace of small requests)."""
    tenant = Tenant("probe", Tier.STANDARD)
    arrivals = [make_request(f"p{i:06d}", tenant, replace(item, arrival_s=0.0)) for i, item in enumerate(items)]
    arrivals = [replace(a, request=replace(a.request, deadline_s=1e12)) for a in arrivals]
    registry = PolicyRegistry([PolicySpec("probe", "unbounded fcfs", _unbounded_fifo)])
    result, _ = simulate(RunSpec("probe", mix, seed), arrivals, registry)
    lo, hi = 0.2 * result.makespan_s, 0.8 * result.makespan_s
    middle = sum(r.finish_s is not None and lo <= r.finish_s < hi for r in result.records)
    if middle == 0:
        finished = sum(r.finish_s is not None for r in result.records)
        return finished / result.makespan_s if result.makespan_s > 0 else 0.0
    return middle / (hi - lo)


LENGTH_EDGES = (500, 1500)  # prompt-token bands of the cost-by-length profile (short, mid, long)


@dataclass(frozen=True)
class BandCost:
    """One GPU type on the requests whose prompt falls in ``[low, high)`` tokens (``high`` None: no
    upper bound): saturated requests per second and dollars per hour per request per second."""

    gpu: str
    low: int
    high: int | None
    requests: int
    capacity_rps: float
    cost_per_rps: float


def cost_by_prompt_length(items: Sequence[TraceItem], gpus: Sequence[str], edges: Sequence[int] = LENGTH_EDGES,
                          seed: int = 0) -> list[BandCost]:
    """Melange's profiling step: one GPU of each type saturated with only one band of prompt lengths
    (``capacity_rps``), priced per request per second. It says which type is cheapest for which
    requests; it is no bound on a pool's cost (an engine that mixes bands can beat each band alone:
    decode rides along with prefill)."""
    lows, highs = [0, *edges], [*edges, None]
    bands: list[BandCost] = []
    for low, high in zip(lows, highs, strict=True):
        chosen = [i for i in items if i.prompt_tokens >= low and (high is None or i.prompt_tokens < high)]
        for gpu in gpus:
            rps = capacity_rps(chosen, {gpu: 1}, seed) if chosen else 0.0
            cost = mix_cost_per_hour({gpu: 1})
            bands.append(BandCost(gpu, low, high, len(chosen), rps, cost / rps if rps > 0 else float("inf")))
    return bands


def _unbounded_fifo(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    return build_scheduler(SchedulerConfig(Policy.FIFO, max_queued=10**9), limits, seed)


@dataclass(frozen=True)
class Comparison:
    scale: float
    offered_rps: float
    summaries: dict[str, RunSummary]


def compare(items: Sequence[TraceItem], mix: Mapping[str, int], policies: Sequence[str], scale: float,
            seed: int = 0, tenants: Sequence[TenantShare] | None = None,
            progress: Progress = _quiet) -> Comparison:
    """Every policy on the same arrivals (the trace scaled by ``scale``, the same tenant draw)."""
    scaled = scale_load(list(items), scale)
    arrivals = requests_for(scaled, tenants, seed)
    return Comparison(scale, mean_rate(scaled), run_policies(arrivals, mix, policies, seed, progress))


def run_policies(arrivals: Sequence[SimRequest], mix: Mapping[str, int], policies: Sequence[str], seed: int,
                 progress: Progress = _quiet) -> dict[str, RunSummary]:
    summaries: dict[str, RunSummary] = {}
    for policy in policies:
        progress(policy)
        summaries[policy] = simulate(RunSpec(policy, mix, seed), arrivals)[1]
    return summaries


@dataclass(frozen=True)
class Sweep:
    points: list[Comparison]
    goodput_rps: dict[str, float]  # DistServe goodput per policy (0 when no point reaches 90 %)


def sweep(items: Sequence[TraceItem], mix: Mapping[str, int], policies: Sequence[str], scales: Sequence[float],
          seed: int = 0, progress: Progress = _quiet) -> Sweep:
    """Attainment versus load for each policy; DistServe goodput = the highest offered rate at which
    attainment stays ≥ 90 % (among the scales tried)."""
    points = [compare(items, mix, policies, scale, seed, progress=progress) for scale in sorted(scales)]
    goodput = {p: max((c.offered_rps for c in points if c.summaries[p].overall.attainment >= GOODPUT_ATTAINMENT),
                      default=0.0) for p in policies}
    return Sweep(points, goodput)
