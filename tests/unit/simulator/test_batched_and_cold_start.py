"""The batched (non-LLM) worker model and cold starts, driven through the scheduling core."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scheduling.requests import Request, RequestKind
from scheduling.slo import Slo
from scheduling.tenants import Tenant, Tier
from simulator.driver import Simulation
from simulator.perf.gpu import SD_SECONDS_PER_STEP_A100, resnet50_perf
from simulator.perf.hardware import GPUS
from simulator.policies import default_registry
from simulator.pools import (
    DIFFUSION_MODEL,
    VISION_MODEL,
    build_diffusion_pool,
    build_pool,
    build_vision_pool,
    diffusion_limits,
    model_limits,
    vision_limits,
)
from simulator.records import SimRequest
from simulator.workloads import load_diffusion
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


def test_diffusion_trace_runs_one_request_at_a_time_per_worker(tmp_path: Path) -> None:
    header = ("gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,"
              "num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora\n")
    rows = ["2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0,63.0,26.0,1.0,30.0,M0,0",
            "2024-11-15 16:57:51,TXT_2_IMG,FAILED,1.0,G1,63.0,26.0,1.0,30.0,M0,0",
            "2024-11-15 16:57:52,TXT_2_IMG,SUCCEED,40.0,G2,63.0,,2.0,20.0,M0,0",
            "2024-11-15 16:57:53,IMG_2_IMG,SUCCEED,20.0,G3,63.0,,1.0,25.0,M0,0"]
    (tmp_path / "lora_request_trace.csv").write_text(header + "\n".join(rows) + "\n")
    items = load_diffusion(tmp_path)
    assert [(i.arrival_s, i.steps) for i in items] == [(0.0, 30), (2.0, 40), (3.0, 25)]
    work = [SimRequest(Request(f"d{n}", TENANT, DIFFUSION_MODEL, RequestKind.BATCHED, i.arrival_s,
                               i.arrival_s + 300.0, 0, rows=i.steps), 0) for n, i in enumerate(items)]
    scheduler = default_registry().get("shunter").build(diffusion_limits(), 0)
    result = Simulation(scheduler, build_diffusion_pool({"a100-80": 2}), work, lambda r: Slo(120.0, 1.0)).run()
    done = {r.request_id: r for r in result.records}
    assert all(r.outcome == "completed" for r in done.values())
    assert done["d0"].finish_s == pytest.approx(30 * SD_SECONDS_PER_STEP_A100)
    assert done["d2"].dispatch_s is not None and done["d2"].dispatch_s >= 3.0
    assert all(max(w.engine.batch_rows) <= 40 for w in result.workers)  # never two requests in one batch
