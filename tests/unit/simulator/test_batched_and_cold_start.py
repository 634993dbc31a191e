"""The batched (non-LLM) worker model and cold starts, driven through the scheduling core."""

from __future__ import annotations

import random

from scheduling.requests import Request, RequestKind
from scheduling.tenants import Tenant, Tier
from simulator.driver import Simulation
from simulator.hardware import GPUS
from simulator.perf import resnet50_perf
from simulator.policies import default_registry
from simulator.pools import VISION_MODEL, build_pool, build_vision_pool, model_limits, vision_limits
from simulator.records import SimRequest, Slo
from tests.unit.simulator.helpers import arrivals

TENANT = Tenant("cam", Tier.STANDARD)


def _images(count: int, rate_per_s: float) -> list[SimRequest]:
    rng, now, out = random.Random(2), 0.0, []
    for i in range(count):
        now += rng.expovariate(rate_per_s)
        request = Request(f"i{i:05d}", TENANT, VISION_MODEL, RequestKind.BATCHED, now, now + 5.0, 0, rows=1,
                          ttft_slo_s=0.05)
        out.append(SimRequest(request, 0))
    return out


def test_batched_model_forms_batches_under_load_and_meets_a_latency_objective() -> None:
    scheduler = default_registry().get("shunter").build(vision_limits(), 0)
    pool = build_vision_pool({"a10": 1})
    result = Simulation(scheduler, pool, _images(3000, 8000.0), lambda r: Slo(0.05, 1.0)).run()
    assert all(r.outcome == "completed" for r in result.records)
    engine = result.workers[0].engine
    assert max(engine.batch_rows) > 1  # 8,000 img/s on one A10 needs batching
    worst = max((r.first_token_s or 0) - r.arrival_s for r in result.records)
    assert worst < 0.05


def test_batch_latency_follows_mlperf_throughput() -> None:
    a10, h100 = resnet50_perf(GPUS["a10"]), resnet50_perf(GPUS["h100"])
    assert 64 / (a10.batch_s(64)) < GPUS["a10"].resnet50_per_s
    assert h100.batch_s(64) < a10.batch_s(64)


def test_a_cold_model_rejects_with_no_worker_until_it_is_loaded_then_serves() -> None:
    pool = build_pool({"a100-80": 1}, cold_start=True)
    ready = pool[0].ready_s
    assert ready > 20.0  # boot plus weights at the assumed load rate
    scheduler = default_registry().get("fifo-gateway").build(model_limits(), 0)
    result = Simulation(scheduler, pool, arrivals(600, rate_per_s=10.0), lambda r: Slo(60, 1)).run()
    before = [r for r in result.records if r.arrival_s < ready]
    after = [r for r in result.records if r.arrival_s >= ready]
    assert before and all((r.outcome, r.reason) == ("rejected", "no_worker") for r in before)
    assert after and all(r.dispatch_s is not None and r.dispatch_s >= ready for r in after)
