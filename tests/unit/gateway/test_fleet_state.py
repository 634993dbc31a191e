"""Fleet-wide quotas and fair share over one state store (the embedded one standing in for Redis,
whose backend passes the same contract tests): two gateways' views agree."""

from __future__ import annotations

import random

import pytest

from gateway.errors import RateLimitedError
from gateway.fair_share import FairShareSync
from gateway.fleet_quotas import FleetQuotas
from gateway.metrics import GatewayMetrics
from gateway.state_store.embedded import EmbeddedStateStore
from scheduling.requests import Request, RequestKind
from scheduling.scheduler import Policy, Scheduler, SchedulerConfig
from scheduling.tenants import Quotas, Tenant, Tier
from scheduling.workers import ModelLimits

NOW = 1_000.0


def _tenant(name: str, quotas: Quotas | None = None) -> Tenant:
    return Tenant(name=name, tier=Tier.STANDARD, quotas=quotas or Quotas())


def _request(request_id: str, tenant: Tenant, prefill: int = 10, max_output: int = 0) -> Request:
    return Request(request_id, tenant, "embed", RequestKind.BATCHED, NOW, NOW + 30, prefill_tokens=prefill,
                   max_output_tokens=max_output)


async def test_two_gateways_share_one_concurrency_budget() -> None:
    store = EmbeddedStateStore()
    tenant = _tenant("t", Quotas(max_concurrent=3))
    gateways = [FleetQuotas(store, GatewayMetrics(), lease_s=60, clock=lambda: NOW) for _ in range(2)]
    taken = []
    for i in range(3):
        request = _request(f"r{i}", tenant)
        await gateways[i % 2].take(request)
        taken.append((gateways[i % 2], request))
    with pytest.raises(RateLimitedError) as refused:
        await gateways[1].take(_request("r3", tenant))
    assert refused.value.code == "max_concurrent" and refused.value.retry_after_s is not None
    owner, request = taken[0]
    owner.release(request, generated_tokens=0)
    await owner.flush()  # the next batch of releases
    await gateways[1].take(_request("r4", tenant))  # the slot given back on one gateway serves the other
    for gateway in gateways:
        await gateway.close()


async def test_a_request_larger_than_the_token_bucket_is_too_large_not_rate_limited() -> None:
    quotas = FleetQuotas(EmbeddedStateStore(), GatewayMetrics(), lease_s=60, clock=lambda: NOW)
    with pytest.raises(Exception) as refused:
        await quotas.take(_request("big", _tenant("t", Quotas(tokens_per_minute=100)), prefill=500))
    assert getattr(refused.value, "code", None) == "too_large"
    await quotas.close()


def _scheduler() -> Scheduler:
    limits = {"embed": ModelLimits("embed", RequestKind.BATCHED, max_batch_size=8, instances=1)}
    return Scheduler(SchedulerConfig(policy=Policy.FAIR), limits, random.Random(0))


async def test_service_on_one_gateway_counts_on_the_other_and_is_not_echoed_back() -> None:
    store = EmbeddedStateStore()
    a, b = _scheduler(), _scheduler()
    sync_a, sync_b = FairShareSync(a, store, "a"), FairShareSync(b, store, "b")
    a.queue.charge(_request("r1", _tenant("t"), prefill=100))
    served = a.service_counters()["t"]
    await sync_a.sync()
    await sync_b.sync()
    assert b.service_counters()["t"] == pytest.approx(served)
    await sync_a.sync()
    assert a.service_counters()["t"] == pytest.approx(served)  # its own service came back to it not at all
    b.queue.charge(_request("r2", _tenant("t"), prefill=50))
    await sync_b.sync()
    await sync_a.sync()
    assert a.service_counters()["t"] == pytest.approx(b.service_counters()["t"])
