"""Trace loading, synthetic arrivals, load scaling, percentiles, fairness and the capacity model."""

from __future__ import annotations

import random
from dataclasses import astuple
from pathlib import Path

import pytest

from scheduling.tenants import Tier
from simulator.metrics import percentile
from simulator.perf.fidelity import RULE_OF_THUMB, fidelity_points, fit_efficiency
from simulator.perf.gpu import LlmPerf
from simulator.perf.hardware import EFFICIENCY, GPUS, MODELS
from simulator.tracking import ServiceTracker, jain_index
from simulator.workloads import load_azure, mean_rate, scale_load, synthetic
from tests.unit.simulator.helpers import LENGTHS


def test_azure_trace_is_read_with_times_relative_to_its_first_row(tmp_path: Path) -> None:
    (tmp_path / "AzureLLMInferenceTrace_conv.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 23:59:59.5000000,10,0\n"
        "2023-11-17 00:00:01.2500000,20,5\n")
    items = load_azure("conv", tmp_path)
    assert [(i.arrival_s, i.prompt_tokens, i.output_tokens) for i in items] == [(0.0, 10, 1), (1.75, 20, 5)]


def test_synthetic_arrivals_have_the_requested_mean_rate_and_scaling_compresses_time() -> None:
    items = synthetic(LENGTHS, 50.0, 4000, random.Random(0), cv=2.0)
    assert mean_rate(items) == pytest.approx(50.0, rel=0.1)
    assert mean_rate(scale_load(items, 3.0)) == pytest.approx(3 * mean_rate(items))
    assert synthetic(LENGTHS, 50.0, 10, random.Random(4)) == synthetic(LENGTHS, 50.0, 10, random.Random(4))


def test_nearest_rank_percentiles() -> None:
    assert percentile([], 99) is None
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0


def test_jain_index_and_the_gap_count_only_tenants_backlogged_for_a_whole_window() -> None:
    assert jain_index([1.0, 1.0, 1.0]) == 1.0
    assert jain_index([1.0, 0.0]) == pytest.approx(0.5)
    tracker = ServiceTracker(window_s=10.0)
    for tenant in ("a", "b"):
        tracker.queued(tenant, Tier.STANDARD, 0.0)
        tracker.queued(tenant, Tier.STANDARD, 0.0)
    tracker.left_queue("a", Tier.STANDARD, 10.5, 300.0)  # window 2: a gets 300, b nothing
    tracker.left_queue("b", Tier.STANDARD, 12.0, 100.0)
    tracker.close(25.0)
    assert tracker.gaps == [0.0, 200.0]  # window 1: both backlogged, no service; window 2: 300 vs 100
    assert tracker.max_gap == 200.0


def test_kv_pool_follows_memory_minus_weights_and_bigger_gpus_are_faster() -> None:
    a10, h100 = LlmPerf(GPUS["a10"], MODELS["llama-3-8b"]), LlmPerf(GPUS["h100"], MODELS["llama-3-8b"])
    assert 0 < a10.kv_pool_tokens < h100.kv_pool_tokens
    assert h100.prefill_s(2048) < a10.prefill_s(2048)
    assert h100.step_s(0, 64, 64_000) < a10.step_s(0, 64, 64_000)


def test_the_worker_model_reproduces_its_calibration_points_within_tolerance() -> None:
    assert all(p.within for p in fidelity_points())


def test_the_shipped_efficiency_is_the_least_squares_fit_to_the_published_points() -> None:
    fit = fit_efficiency()
    for shipped, fitted in zip(astuple(EFFICIENCY), astuple(fit), strict=True):
        assert shipped == pytest.approx(fitted, rel=0.005)
    squared = [sum(p.error**2 for p in fidelity_points(e)) for e in (RULE_OF_THUMB, EFFICIENCY)]
    assert squared[1] < squared[0]


def test_pool_planning_finds_the_fewest_gpus_of_each_type_and_only_tries_cheaper_mixes() -> None:
    from simulator.planning import Targets, plan_pool
    from tests.unit.simulator.helpers import arrivals

    work = arrivals(120, rate_per_s=4.0)
    plan = plan_pool(work, targets=Targets(0.9, 0.9), types=("a10", "a100-80"), max_per_type=6, max_evaluations=14)
    assert plan.best_single is not None and plan.best_single.met
    gpu, count = next(iter(plan.best_single.mix.items()))
    tried = {tuple(e.mix.items()): e.met for e in plan.evaluations}
    assert count == 1 or tried[((gpu, count - 1),)] is False
    assert all(e.cost_per_hour < plan.best_single.cost_per_hour for e in plan.evaluations if len(e.mix) > 1)
