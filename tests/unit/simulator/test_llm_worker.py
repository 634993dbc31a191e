"""The LLM engine model: prefill then decode timing, chunked prefill, joining at iteration
boundaries, KV admission; fast-forwarded segments equal single iterations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.tenants import Tenant, Tier
from simulator.engine import ARRIVAL, EventLoop
from simulator.hardware import GPUS, MODELS
from simulator.llm_worker import LlmWorker, Sequence
from simulator.perf import STEP_TOKEN_BUDGET, LlmPerf
from tests.unit.simulator.helpers import one

PERF = LlmPerf(GPUS["a100-80"], MODELS["llama-3-8b"])
TENANT = Tenant("t", Tier.STANDARD)


class Recorder:
    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.done: dict[str, tuple[float, int]] = {}
        self.drops: list[str] = []

    def first_token(self, request_id: str, now: float) -> None:
        self.first[request_id] = now

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        self.done[request_id] = (now, generated_tokens)

    def dropped(self, request_id: str, now: float) -> None:
        self.drops.append(request_id)


def _worker(perf: LlmPerf = PERF, lazy: bool = False) -> tuple[EventLoop, LlmWorker, Recorder]:
    loop, recorder = EventLoop(), Recorder()
    return loop, LlmWorker("w", perf, loop, recorder, lazy), recorder


def _sequence(request_id: str, prompt: int, output: int, arrival_s: float = 0.0) -> Sequence:
    item = one(request_id, TENANT, arrival_s, prompt, output)
    return Sequence(item.request, item.output_tokens)


def test_one_request_prefills_then_decodes_one_token_per_iteration() -> None:
    loop, worker, seen = _worker()
    worker.enqueue(_sequence("a", 1000, 5))
    loop.run()
    prefill = PERF.step_s(1000, 0, 0, 1000)
    assert seen.first["a"] == pytest.approx(prefill)
    decode = PERF.step_s(0, 1, 1001 + 3 // 2)  # 4 more tokens, KV read at the segment's mid-point
    assert seen.done["a"] == (pytest.approx(prefill + 4 * decode), 5)
    assert worker.free_blocks == worker.total_blocks and worker.busy_s == pytest.approx(seen.done["a"][0])


def test_long_prompts_are_chunked_at_the_iteration_token_budget() -> None:
    loop, worker, seen = _worker()
    worker.enqueue(_sequence("long", STEP_TOKEN_BUDGET * 2 + 10, 1))
    loop.run()
    assert worker.iterations == 3 and seen.done["long"][1] == 1


def test_an_arrival_joins_a_decode_segment_at_the_next_iteration_boundary() -> None:
    loop, worker, seen = _worker()
    worker.enqueue(_sequence("a", 100, 200))
    loop.at(0.5, ARRIVAL, lambda: worker.enqueue(_sequence("b", 100, 2)))
    loop.run()
    assert "b" in seen.done and seen.first["b"] > 0.5
    assert seen.done["a"][1] == 200 and seen.done["b"][1] == 2
    step = seen.first["b"] - 0.5
    assert 0 < step < 0.1  # one boundary plus b's prefill iteration


def test_sequences_wait_for_kv_blocks_of_prompt_plus_reserved_output() -> None:
    small = LlmPerf(GPUS["a10"], MODELS["llama-2-7b"])  # about 16k KV tokens
    loop, worker, seen = _worker(small)
    capacity = worker.total_blocks * 16
    worker.enqueue(_sequence("big", capacity - 2000, 1))
    worker.enqueue(_sequence("next", 3000, 1))
    assert [s.request.request_id for s in worker.waiting] == ["next"]
    loop.run()
    assert seen.first["next"] >= seen.done["big"][0]


def test_lazy_timeouts_drop_a_queued_request_only_when_it_reaches_the_head() -> None:
    small = LlmPerf(GPUS["a10"], MODELS["llama-2-7b"])
    loop, worker, seen = _worker(small, lazy=True)
    worker.enqueue(_sequence("big", worker.total_blocks * 16 - 2000, 200))
    late = _sequence("late", 3000, 1)
    late.request = replace(late.request, deadline_s=1.0)
    worker.enqueue(late)
    loop.run()
    assert late.request.deadline_s < seen.done["big"][0]
    assert seen.drops == ["late"] and "late" not in seen.done
