"""Per-GPU step token budgets chosen for the tightest TPOT objective (Sarathi-Serve's rule)."""

from __future__ import annotations

from simulator.engine import EventLoop
from simulator.llm_worker import LlmWorker
from simulator.perf.gpu import (
    MIN_STEP_TOKEN_BUDGET,
    STEP_TOKEN_BUDGET,
    TPOT_ITERATION_SHARE,
    LlmPerf,
    tpot_step_budget,
)
from simulator.perf.hardware import GPUS, MODELS
from simulator.pools import llm_perf
from tests.unit.simulator.test_llm_worker import Recorder, _sequence

MODEL = MODELS["llama-3-8b"]


def test_a_full_chunk_iteration_fits_the_tpot_objective_on_every_gpu_fast_enough() -> None:
    for name in ("a100-80", "h100", "h200"):
        budget = tpot_step_budget(GPUS[name], MODEL, 0.1)
        perf = LlmPerf(GPUS[name], MODEL, step_token_budget=budget)
        assert perf.step_s(budget, 0, 0, budget) <= TPOT_ITERATION_SHARE * 0.1


def test_slower_gpus_get_smaller_chunks_and_fast_ones_keep_the_default() -> None:
    budgets = {name: tpot_step_budget(GPUS[name], MODEL, 0.1) for name in ("a10", "a100-80", "h100")}
    assert budgets["a10"] < budgets["a100-80"] < budgets["h100"] == STEP_TOKEN_BUDGET
    assert budgets["a10"] == MIN_STEP_TOKEN_BUDGET  # too slow for the objective: the floor
    assert tpot_step_budget(GPUS["a100-80"], MODEL, 1.0) == STEP_TOKEN_BUDGET  # a loose objective: the default


def test_pools_build_engines_with_their_gpus_budget_and_a_matching_prefill_speed() -> None:
    a10, a100 = llm_perf("a10"), llm_perf("a100-80")
    assert a10.step_token_budget < a100.step_token_budget
    assert a10.profile().prefill_tokens_per_s == a10.prefill_rate()
    assert a10.profile().decode_s_per_token(1000, a10.kv_pool_tokens) is not None


def test_the_engine_chunks_prompts_at_its_own_step_budget() -> None:
    perf = LlmPerf(GPUS["a100-80"], MODEL, step_token_budget=512)
    loop, seen = EventLoop(), Recorder()
    worker = LlmWorker("w", perf, loop, seen)
    worker.enqueue(_sequence("long", 512 * 3 + 10, 1))
    loop.run()
    assert worker.iterations == 4 and seen.done["long"][1] == 1
