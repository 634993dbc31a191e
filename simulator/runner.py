"""One simulated run, end to end: a workload, a tenant mix, a pool and a policy in; records and a
summary out. The same arguments give the same result (every RNG is seeded from ``seed``)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from simulator.driver import SimResult, Simulation
from simulator.metrics import RunSummary, summarise
from simulator.policies import PolicyRegistry, default_registry
from simulator.pools import DEFAULT_MODEL, build_pool, mix_cost_per_hour, model_limits
from simulator.records import SimRequest
from simulator.tenancy import TenantShare, assign, default_mix, slo_of
from simulator.workloads import TraceItem


@dataclass(frozen=True)
class RunSpec:
    policy: str
    mix: Mapping[str, int]
    seed: int = 0
    model: str = DEFAULT_MODEL
    cold_start: bool = False


def requests_for(items: Sequence[TraceItem], tenants: Sequence[TenantShare] | None = None,
                 seed: int = 0) -> list[SimRequest]:
    """The same tenant assignment for every policy of a comparison (seeded by ``seed``)."""
    return assign(items, tenants if tenants is not None else default_mix(), random.Random(seed))


def simulate(spec: RunSpec, arrivals: Sequence[SimRequest], registry: PolicyRegistry | None = None,
             progress: Callable[[float], None] | None = None) -> tuple[SimResult, RunSummary]:
    policy = (registry or default_registry()).get(spec.policy)
    scheduler = policy.build(model_limits(), spec.seed)
    pool = build_pool(spec.mix, spec.model, lazy_timeouts=policy.lazy_timeouts, cold_start=spec.cold_start)
    result = Simulation(scheduler, pool, arrivals, slo_of).run(progress)
    return result, summarise(result, mix_cost_per_hour(spec.mix))
