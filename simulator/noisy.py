"""The noisy-tenant experiment: four standard tenants of equal weight, each with a tokens-per-minute
quota of ``QUOTA_HEADROOM`` x its average demand; in the middle third of the run one of them
sends ``burst`` x its quota. Measured per policy: the quiet tenants' p99 TTFT over requests that
arrive during the burst window, with and without the burst (the same base arrivals)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.outcomes import Outcome
from scheduling.tenants import Tenant, Tier
from simulator.metrics import percentile
from simulator.records import SimRequest
from simulator.runner import RunSpec, simulate
from simulator.tenancy import TenantShare, assign, make_request, max_tokens_for, with_quota
from simulator.workloads import TraceItem, mean_rate

QUOTA_HEADROOM = 1.5
NOISY = "noisy"
QUIET = ("quiet-a", "quiet-b", "quiet-c")


@dataclass(frozen=True)
class NoisyResult:
    policy: str
    quiet_p99_ttft_s: float | None
    quiet_p99_ttft_burst_s: float | None
    noisy_rejected: int
    noisy_offered: int

    @property
    def ratio(self) -> float | None:
        if self.quiet_p99_ttft_s is None or self.quiet_p99_ttft_burst_s is None:
            return None
        return self.quiet_p99_ttft_burst_s / self.quiet_p99_ttft_s


def _cost(item: TraceItem) -> int:
    """Quota cost of a request: prompt plus the ``max_tokens`` it asks for."""
    return item.prompt_tokens + max_tokens_for(item.output_tokens)


def _tenants(items: Sequence[TraceItem]) -> list[TenantShare]:
    span_min = max(1e-9, (items[-1].arrival_s - items[0].arrival_s) / 60.0)
    cost_per_min = sum(_cost(i) for i in items) / span_min / 4
    quota = int(QUOTA_HEADROOM * cost_per_min)
    return [TenantShare(with_quota(Tenant(name, Tier.STANDARD, 1.0), quota), 0.25) for name in (*QUIET, NOISY)]


def burst_arrivals(items: Sequence[TraceItem], shares: Sequence[TenantShare], burst: float,
                   rng: random.Random) -> list[SimRequest]:
    """Extra requests of the noisy tenant in the middle third: ``burst`` x its quota in tokens."""
    noisy = next(s.tenant for s in shares if s.tenant.name == NOISY)
    quota_per_s = (noisy.quotas.tokens_per_minute or 0) / 60.0
    start, end = items[-1].arrival_s / 3, 2 * items[-1].arrival_s / 3
    mean_cost = sum(_cost(i) for i in items) / len(items)
    rate = burst * quota_per_s / mean_cost
    now, extra = start, list[SimRequest]()
    while True:
        now += rng.expovariate(rate)
        if now >= end:
            return extra
        item = items[rng.randrange(len(items))]
        extra.append(make_request(f"b{len(extra):06d}-{NOISY}", noisy,
                                  TraceItem(now, item.prompt_tokens, item.output_tokens)))


def run_noisy(items: Sequence[TraceItem], mix: Mapping[str, int], policies: Sequence[str], burst: float = 10.0,
              seed: int = 0) -> list[NoisyResult]:
    shares = _tenants(items)
    base = assign(items, shares, random.Random(seed))
    extra = burst_arrivals(items, shares, burst, random.Random(seed + 1))
    with_burst = sorted([*base, *extra], key=lambda a: (a.request.arrival_s, a.request.request_id))
    start, end = items[-1].arrival_s / 3, 2 * items[-1].arrival_s / 3
    results = []
    for policy in policies:
        quiet = []
        for arrivals in (base, with_burst):
            result, _ = simulate(RunSpec(policy, mix, seed), arrivals)
            ttfts = [r.ttft_s for r in result.records if r.tenant in QUIET and start <= r.arrival_s < end
                     and r.ttft_s is not None]
            quiet.append(percentile(ttfts, 99))
            noisy = [r for r in result.records if r.tenant == NOISY]
        results.append(NoisyResult(policy, quiet[0], quiet[1], sum(r.outcome is Outcome.REJECTED for r in noisy),
                                   len(noisy)))
    return results


def offered_rate(items: Sequence[TraceItem]) -> float:
    return mean_rate(list(items))
