"""Who sends the workload: tenants with tiers, weights and quotas, the SLO of each tier, and how
a workload's requests become ``scheduling.requests.Request`` objects.

The tier SLOs (a GPU fleet's: premium 2 s, standard 4 s, batch 20 s to first token), queue
deadlines, tier budget shares and shed waits are the simulator's own; the shipped
``config/scheduling.yaml`` has the same shares and deadlines but looser SLOs for the CPU demo
(the simulator does not read the gateway's configuration files).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.requests import Request, RequestKind
from scheduling.slo import Slo
from scheduling.tenants import Quotas, Tenant, Tier
from simulator.records import SimRequest
from simulator.workloads import TraceItem

SLOS = {Tier.PREMIUM: Slo(2.0, 0.1, 30.0), Tier.STANDARD: Slo(4.0, 0.2, 60.0), Tier.BATCH: Slo(20.0, 1.0, 300.0)}
QUEUE_DEADLINE_S = {tier: slo.deadline_s for tier, slo in SLOS.items()}
TIER_SHARE = {Tier.PREMIUM: 1.0, Tier.STANDARD: 0.75, Tier.BATCH: 0.5}
# Batch is shed at half its TTFT objective, as in config/scheduling.yaml (15 s of 30 s there).
SHED_WAIT_S: dict[Tier, float | None] = {Tier.PREMIUM: None, Tier.STANDARD: 15.0, Tier.BATCH: 10.0}
PREFILL_LINE_S: float | None = 0.25  # max_prefill_line_s of config/scheduling.yaml
MIN_PREFILL_LINE_TOKENS = 375  # min_prefill_line_tokens of config/scheduling.yaml (binds no GPU: >= 5,000 tok/s)
MAX_TOKENS_STEPS = (64, 128, 256, 512, 1024, 2048, 4096)
MODEL = "chat"


@dataclass(frozen=True)
class TenantShare:
    tenant: Tenant
    share: float


def default_mix() -> list[TenantShare]:
    """Two premium, three standard and two batch tenants (shares of the requests): 20 % premium,
    60 % standard, 20 % batch: a chat service (the conversation trace) with some offline jobs. An
    assumption about the fleet; ``docs/simulation.md`` shows how the result moves with it."""
    return [
        TenantShare(Tenant("acme", Tier.PREMIUM, weight=4.0), 0.12),
        TenantShare(Tenant("bolt", Tier.PREMIUM, weight=4.0), 0.08),
        TenantShare(Tenant("cirrus", Tier.STANDARD, weight=2.0), 0.24),
        TenantShare(Tenant("delta", Tier.STANDARD, weight=2.0), 0.21),
        TenantShare(Tenant("echo", Tier.STANDARD, weight=1.0), 0.15),
        TenantShare(Tenant("fjord", Tier.BATCH, weight=1.0), 0.12),
        TenantShare(Tenant("gale", Tier.BATCH, weight=1.0), 0.08),
    ]


def slo_of(request: Request) -> Slo:
    return SLOS[request.tier]


def max_tokens_for(output_tokens: int) -> int:
    """What a client asks for: the smallest usual ``max_tokens`` step that covers the output."""
    return next((step for step in MAX_TOKENS_STEPS if step >= output_tokens), output_tokens)


def make_request(request_id: str, tenant: Tenant, item: TraceItem) -> SimRequest:
    tier = tenant.tier
    request = Request(
        request_id=request_id, tenant=tenant, model=MODEL, kind=RequestKind.LLM, arrival_s=item.arrival_s,
        deadline_s=item.arrival_s + QUEUE_DEADLINE_S[tier], prefill_tokens=item.prompt_tokens,
        max_output_tokens=max_tokens_for(item.output_tokens), ttft_slo_s=SLOS[tier].ttft_s)
    return SimRequest(request, item.output_tokens)


def assign(items: Sequence[TraceItem], mix: Sequence[TenantShare], rng: random.Random) -> list[SimRequest]:
    """Give each request a tenant drawn by share; ids are ``<index>-<tenant>`` in arrival order."""
    tenants = [s.tenant for s in mix]
    weights = [s.share for s in mix]
    return [make_request(f"r{index:06d}-{tenant.name}", tenant, item)
            for index, (item, tenant) in enumerate(zip(items, rng.choices(tenants, weights, k=len(items)),
                                                       strict=True))]


def with_quota(tenant: Tenant, tokens_per_minute: int) -> Tenant:
    return Tenant(tenant.name, tenant.tier, tenant.weight, Quotas(tokens_per_minute=tokens_per_minute),
                  tenant.allowed_regions, tenant.allowed_models)
