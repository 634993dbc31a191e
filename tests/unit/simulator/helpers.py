"""Small workloads and pools for simulator tests (no trace files needed)."""

from __future__ import annotations

import random

from scheduling.tenants import Tenant, Tier
from simulator.records import SimRequest
from simulator.tenancy import TenantShare, assign, make_request
from simulator.workloads import TraceItem, synthetic

LENGTHS = [(200, 50), (1000, 120), (3000, 300), (500, 10), (60, 400), (1500, 80)]


def workload(count: int = 300, rate_per_s: float = 40.0, seed: int = 1) -> list[TraceItem]:
    return synthetic(LENGTHS, rate_per_s, count, random.Random(seed), cv=1.5)


def arrivals(count: int = 300, rate_per_s: float = 40.0, seed: int = 1) -> list[SimRequest]:
    mix = [TenantShare(Tenant("gold", Tier.PREMIUM, 4.0), 0.2), TenantShare(Tenant("silver", Tier.STANDARD, 2.0), 0.5),
           TenantShare(Tenant("iron", Tier.BATCH, 1.0), 0.3)]
    return assign(workload(count, rate_per_s, seed), mix, random.Random(seed))


def one(request_id: str, tenant: Tenant, arrival_s: float, prompt: int, output: int) -> SimRequest:
    return make_request(request_id, tenant, TraceItem(arrival_s, prompt, output))
