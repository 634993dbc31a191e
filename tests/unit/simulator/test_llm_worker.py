"""The LLM engine model: prefill then decode timing, chunked prefill, joining at iteration
boundaries, KV admission on the prompt, blocks allocated as sequences grow, preemption by
recompute; fast-forwarded segments equal single iterations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.tenants import Tenant, Tier
from simulator.engine import ARRIVAL, EventLoop
from simulator.llm_worker import LlmWorker, Sequence
from simulator.perf.fitted import FittedPerf
from simulator.perf.gpu import STEP_TOKEN_BUDGET, LlmPerf
from simulator.perf.hardware import GPUS, MODELS
from simulator.perf.protocol import EngineLimits
from simulator.perf.step_fit import StepLaw
from tests.unit.simulator.helpers import one

PERF = LlmPerf(GPUS["a100-80"], MODELS["llama-3-8b"])
TENANT = Tenant("t", Tier.STANDARD)


class Recorder:
    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.firsts: list[str] = []
        self.done: dict[str, tuple[float, int]] = {}
        self.drops: list[str] = []

    def first_token(self, request_id: str, now: float) -> None:
        self.first[request_id] = now
        self.firsts.append(request_id)

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        self.done[request_id] = (now, generated_tokens)

    def dropped(self, request_id: str, now: float) -> None:
        self.drops.append(request_id)


def _worker(perf: LlmPerf = PERF, lazy: bool = False) -> tuple[EventLoop, LlmWorker, Recorder]:
    loop, recorder = EventLoop(), Recorder()
    return loop, LlmWorker("w", perf, loop, recorder, lazy), recorder


def _sequence(request_id: str, prompt: int, output: int, arrival_s: float = 0.0,
              tenant: Tenant = TENANT) -> Sequence:
    item = one(request_id, tenant, arrival_s, prompt, output)
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


def test_sequences_wait_for_kv_blocks_of_their_prompt() -> None:
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


SMALL = LlmPerf(GPUS["a10"], MODELS["llama-2-7b"])  # about 16k KV tokens


def test_a_sequence_is_admitted_when_its_prompt_fits_though_its_reserved_output_does_not() -> None:
    loop, worker, seen = _worker(SMALL)
    capacity = worker.total_blocks * 16
    worker.enqueue(_sequence("a", capacity // 2, 2000))  # prompt + max_tokens (2,048) well past half
    assert worker.running[0].blocks == (capacity // 2 + 1 + 15) // 16  # the prompt and its first token only
    worker.enqueue(_sequence("b", capacity // 3, 10))  # fits beside a's prompt, not beside its reservation
    loop.run()
    assert seen.done["b"][0] < seen.done["a"][0]  # b ran beside a (reserving, it would wait for a to end)
    assert seen.done["a"][1] == 2000 and seen.done["b"][1] == 10 and worker.preemptions == 0


def test_when_blocks_run_out_the_latest_admitted_sequence_is_preempted_and_recomputed() -> None:
    loop, worker, seen = _worker(SMALL)
    capacity = worker.total_blocks * 16
    first, second = _sequence("first", capacity * 9 // 20, 1500), _sequence("second", capacity * 9 // 20, 1500)
    worker.enqueue(first)
    worker.enqueue(second)
    loop.run()
    assert worker.preemptions >= 1 and second.preemptions >= 1 and first.preemptions == 0
    assert seen.done["first"][1] == 1500 and seen.done["second"][1] == 1500  # every token, once
    assert seen.done["second"][0] > seen.done["first"][0]
    assert sorted(seen.firsts) == ["first", "second"]  # a recompute emits no second first token
    assert worker.recomputed_tokens > capacity * 9 // 20  # the prompt and the tokens generated before
    assert worker.free_blocks == worker.total_blocks and not worker.running and not worker.waiting


def test_preemption_takes_the_lowest_tier_before_a_later_admitted_higher_one() -> None:
    loop, worker, _ = _worker(SMALL)
    capacity = worker.total_blocks * 16
    batch = _sequence("batch", capacity * 9 // 20, 1500, tenant=Tenant("b", Tier.BATCH))
    premium = _sequence("premium", capacity * 9 // 20, 1500, tenant=Tenant("p", Tier.PREMIUM))
    worker.enqueue(batch)
    worker.enqueue(premium)
    loop.run()
    assert batch.preemptions >= 1 and premium.preemptions == 0


def test_a_decode_segment_ends_where_single_iterations_would_run_out_of_blocks() -> None:
    def run(single_steps: bool) -> tuple[dict[str, tuple[float, int]], int]:
        loop, worker, seen = _worker(SMALL)
        if single_steps:
            worker._decode_steps = lambda decoders: 1  # type: ignore[method-assign]
        capacity = worker.total_blocks * 16
        for name in ("a", "b", "c"):
            worker.enqueue(_sequence(name, capacity // 4, 1900))
        loop.run()
        return seen.done, worker.preemptions

    segmented, single = run(False), run(True)
    assert segmented[1] == single[1] >= 1
    for name, (finish_s, generated) in single[0].items():
        assert segmented[0][name] == (pytest.approx(finish_s, rel=1e-3), generated)


@pytest.mark.parametrize(("priority_admission", "order"), [(False, ["b1", "b2", "s1", "p1"]),
                                                          (True, ["b1", "p1", "s1", "b2"])])
def test_waiting_sequences_are_admitted_by_arrival_or_by_tier_then_arrival(priority_admission: bool,
                                                                           order: list[str]) -> None:
    one_slot = FittedPerf(EngineLimits(1, 63, 63, 8192, priority_admission=priority_admission),
                          StepLaw(0.005, 0.003, 0.004, 0.003))
    loop, recorder = EventLoop(), Recorder()
    worker = LlmWorker("w", one_slot, loop, recorder)
    tiers = {"b": Tenant("b", Tier.BATCH), "s": Tenant("s", Tier.STANDARD), "p": Tenant("p", Tier.PREMIUM)}
    for request_id in ("b1", "b2", "s1", "p1"):  # b1 starts at once, the others wait for its slot
        worker.enqueue(_sequence(request_id, 20, 3, tenant=tiers[request_id[0]]))
    loop.run()
    assert recorder.firsts == order


def test_a_preempted_sequence_goes_back_to_its_tier_and_arrival_place_with_priority_admission() -> None:
    limits = replace(PERF.limits, priority_admission=True, kv_pool_tokens=SMALL.limits.kv_pool_tokens)
    loop, recorder = EventLoop(), Recorder()
    worker = LlmWorker("w", FittedPerf(limits, StepLaw(0.005, 0.0001, 0.004, 0.0)), loop, recorder)
    capacity = worker.total_blocks * 16
    batch = _sequence("batch", capacity * 9 // 20, 1500, tenant=Tenant("b", Tier.BATCH))
    premium = _sequence("premium", capacity * 9 // 20, 1500, tenant=Tenant("p", Tier.PREMIUM))
    standard = _sequence("standard", capacity * 9 // 20, 10, tenant=Tenant("s", Tier.STANDARD))
    worker.enqueue(batch)
    worker.enqueue(premium)
    loop.at(0.05, ARRIVAL, lambda: worker.enqueue(standard))  # waits: the two fill the pool
    loop.run()
    assert batch.preemptions >= 1 and premium.preemptions == 0
    assert recorder.done["standard"][0] < recorder.done["batch"][0]  # batch re-queued behind standard
    assert worker.free_blocks == worker.total_blocks and not worker.waiting
