"""The fitted CPU worker: iteration times from the fitted law, the engine's chunk budget, its
short-prefill-first iterations, admission by real output, and the profile file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from scheduling.tenants import Tenant, Tier
from simulator.engine import ARRIVAL, EventLoop
from simulator.llm_worker import LlmWorker, Sequence
from simulator.perf.fitted import EngineBusy, FittedPerf, TimedPerf, load_fitted_perf
from simulator.perf.protocol import EngineLimits, IterationWork, LlmPerfModel
from simulator.perf.step_fit import StepLaw
from tests.unit.simulator.helpers import one

LAW = StepLaw(overhead_s=0.004, prefill_token_s=0.003, decode_seq_s=0.006, attention_s_per_ktoken=0.004)
LIMITS = EngineLimits(max_sequences=16, step_token_budget=63, prefill_chunk_tokens=63, kv_pool_tokens=8192,
                      short_prefill_first=True)
PERF = FittedPerf(LIMITS, LAW)
TENANT = Tenant("t", Tier.STANDARD)


class Recorder:
    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.done: dict[str, float] = {}

    def first_token(self, request_id: str, now: float) -> None:
        self.first[request_id] = now

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        self.done[request_id] = now

    def dropped(self, request_id: str, now: float) -> None:
        raise AssertionError("no timeouts here")


def _run(perf: LlmPerfModel, requests: list[tuple[str, float, int, int]]) -> Recorder:
    loop, seen = EventLoop(), Recorder()
    worker = LlmWorker("cpu", perf, loop, seen)
    for request_id, arrival_s, prompt, output in requests:
        item = one(request_id, TENANT, arrival_s, prompt, output)
        sequence = Sequence(item.request, item.output_tokens)
        loop.at(arrival_s, ARRIVAL, lambda s=sequence: worker.enqueue(s))  # type: ignore[misc]
    loop.run()
    return seen


def test_an_iteration_costs_the_law_of_its_tokens_and_attended_positions() -> None:
    work = IterationWork(((100, 63),), decode_seqs=2, decode_context_tokens=300, kv_tokens=0)
    assert PERF.iteration_s(work) == pytest.approx(LAW.step_s(63, 2, 63 * 100 + 63 * 62 / 2 + 300))


def test_a_lone_prompt_is_prefilled_in_chunks_of_the_engine_budget() -> None:
    seen = _run(PERF, [("a", 0.0, 130, 1)])
    chunks = [(0, 63), (63, 63), (126, 4)]
    expected = sum(PERF.iteration_s(IterationWork((c,), 0, 0, 0)) for c in chunks)
    assert seen.first["a"] == pytest.approx(expected)
    assert PERF.prefill_s(130) == pytest.approx(expected)


def test_a_short_prompt_arriving_during_decodes_gets_an_iteration_of_its_own() -> None:
    decode_alone = PERF.decode_step_s(1, 20)
    seen = _run(PERF, [("long", 0.0, 20, 50), ("short", 0.001 + PERF.prefill_s(20) + 2 * decode_alone, 40, 5)])
    # it joins at the next iteration boundary, then its 40 prompt tokens run alone (no decodes)
    boundary = seen.first["long"] + 3 * PERF.decode_step_s(1, 21)
    short_step = PERF.iteration_s(IterationWork(((0, 40),), 0, 0, 0))
    assert seen.first["short"] == pytest.approx(boundary + short_step, rel=5e-3)  # KV read at the mid-point


def test_a_long_prompt_shares_iterations_with_the_decodes() -> None:
    seen = _run(PERF, [("long", 0.0, 20, 50), ("big", 0.001 + PERF.prefill_s(20), 100, 5)])
    # one decode leaves 62 tokens of the 63-token budget: two mixed iterations (62 + 38 tokens)
    after = seen.first["long"] + PERF.decode_step_s(1, 20)
    first = PERF.iteration_s(IterationWork(((0, 62),), 1, 20, 0))
    assert seen.first["big"] == pytest.approx(after + first + PERF.iteration_s(IterationWork(((62, 38),), 1, 21, 0)),
                                              rel=2e-2)


def test_two_short_prefill_iterations_never_follow_each_other() -> None:
    limits = EngineLimits(16, 63, 63, 8192, short_prefill_first=True)
    seen = _run(FittedPerf(limits, LAW), [("a", 0.0, 20, 40), ("b", 0.2, 30, 5), ("c", 0.2, 30, 5)])
    # b gets its short iteration (with c's chunk, 60 tokens in all): both first tokens together
    assert seen.first["b"] == seen.first["c"]
    assert seen.done["a"] > seen.first["b"]


def test_kv_is_allocated_as_sequences_grow_not_reserved_for_max_tokens() -> None:
    small = EngineLimits(16, 63, 63, kv_pool_tokens=64)
    requests = [("a", 0.0, 16, 8), ("b", 0.0, 16, 8)]  # max_tokens 64 each (the tenancy's step)
    together = _run(FittedPerf(small, LAW), requests)
    assert together.first["b"] < together.done["a"]  # reserving max_tokens would run them one by one


def test_the_profile_file_gives_the_engine_limits_and_the_law(tmp_path: Path) -> None:
    path = tmp_path / "profile.json"
    engine = {"max_sequences": 16, "step_token_budget": 63, "prefill_chunk_tokens": 63, "kv_pool_tokens": 8192,
              "kv_block_tokens": 16, "short_prefill_first": True, "context_tokens": 4096,
              "reserve_output": False}  # a key of older profiles: ignored
    path.write_text(json.dumps({"engine": engine, "step_law": LAW.to_json()}))
    # profiles from before the field describe the chat engine, which always admitted by priority
    assert load_fitted_perf(path) == FittedPerf(replace(LIMITS, priority_admission=True), LAW)
    path.write_text(json.dumps({"engine": {**engine, "priority_admission": False}, "step_law": LAW.to_json()}))
    assert load_fitted_perf(path) == PERF


def test_the_served_term_adds_its_cost_per_decoding_sequence_and_reads_from_the_profile() -> None:
    served = FittedPerf(LIMITS, LAW, served_decode_seq_s=0.002)
    work = IterationWork((), 8, 8 * 100, 8 * 100)
    assert served.iteration_s(work) == pytest.approx(PERF.iteration_s(work) + 8 * 0.002)
    assert served.decode_step_s(8, 100) == PERF.decode_step_s(8, 100)  # the engine alone
    profile = {"engine": {"max_sequences": 16, "step_token_budget": 63, "prefill_chunk_tokens": 63,
                          "kv_pool_tokens": 8192, "short_prefill_first": True, "priority_admission": False},
               "step_law": LAW.to_json(), "served": {"decode_seq_s": 0.002}}
    assert FittedPerf.from_profile(profile) == served


def test_the_served_prefill_factor_scales_the_prefill_work_not_the_step_overhead_or_the_decodes() -> None:
    slower = FittedPerf(LIMITS, LAW, served_prefill_factor=1.5)
    work = IterationWork(((100, 63),), decode_seqs=2, decode_context_tokens=300, kv_tokens=0)
    prefill_work = LAW.prefill_token_s * 63 + LAW.attention_s_per_ktoken * (63 * 100 + 63 * 62 / 2) / 1000
    assert slower.iteration_s(work) == pytest.approx(PERF.iteration_s(work) + 0.5 * prefill_work)
    decode_only = IterationWork((), 8, 800, 800)
    assert slower.iteration_s(decode_only) == PERF.iteration_s(decode_only)
    assert slower.prefill_s(130) > PERF.prefill_s(130)


def test_the_prefill_split_is_the_law_alone_and_sums_to_the_prefill_at_factor_one() -> None:
    overhead_s, work_s = PERF.prefill_split_s(130)
    assert overhead_s == pytest.approx(3 * LAW.overhead_s)  # chunks of 63, 63 and 4 tokens
    assert overhead_s + work_s == pytest.approx(PERF.prefill_s(130))
    assert FittedPerf(LIMITS, LAW, served_prefill_factor=2.0).prefill_split_s(130) == (overhead_s, work_s)


def test_the_profile_gives_the_served_prefill_factor_and_one_without_it() -> None:
    profile = {"engine": {"max_sequences": 16, "step_token_budget": 63, "prefill_chunk_tokens": 63,
                          "kv_pool_tokens": 8192, "short_prefill_first": True},
               "step_law": LAW.to_json(), "served": {"decode_seq_s": 0.002, "prefill_factor": 1.2}}
    assert FittedPerf.from_profile(profile).served_prefill_factor == 1.2
    assert FittedPerf.from_profile({**profile, "served": {}}).served_prefill_factor == 1.0
    with pytest.raises(ValueError):
        FittedPerf(LIMITS, LAW, served_prefill_factor=0.0)


def test_decoders_resting_in_a_short_prefill_iteration_still_pay_the_served_term() -> None:
    served = FittedPerf(LIMITS, LAW, served_decode_seq_s=0.002)
    short = IterationWork(((0, 40),), 0, 0, 400, resting_decoders=5)
    assert served.iteration_s(short) == pytest.approx(PERF.iteration_s(short) + 5 * 0.002)
    assert PERF.iteration_s(short) == PERF.iteration_s(IterationWork(((0, 40),), 0, 0, 400))  # engine alone


class _Recording:
    """A FittedPerf that keeps every iteration it was asked to time."""

    def __init__(self) -> None:
        self.perf = PERF
        self.works: list[IterationWork] = []

    @property
    def limits(self) -> EngineLimits:
        return LIMITS

    def iteration_s(self, work: IterationWork) -> float:
        self.works.append(work)
        return PERF.iteration_s(work)


def test_the_worker_tells_a_short_prefill_iteration_how_many_decoders_rest() -> None:
    loop, seen, recording = EventLoop(), Recorder(), _Recording()
    worker = LlmWorker("cpu", recording, loop, seen)
    for request_id, arrival_s, prompt, output in [("a", 0.0, 20, 200), ("b", 0.0, 20, 200), ("c", 1.0, 30, 5)]:
        item = one(request_id, TENANT, arrival_s, prompt, output)
        sequence = Sequence(item.request, item.output_tokens)
        loop.at(arrival_s, ARRIVAL, lambda s=sequence: worker.enqueue(s))  # type: ignore[misc]
    loop.run()
    # a starts alone; b's short iteration runs while a decodes, c's while a and b do
    prefills = [(w.prefill_tokens, w.decode_seqs, w.resting_decoders) for w in recording.works if w.prefill_tokens]
    assert prefills == [(20, 0, 0), (20, 0, 1), (30, 0, 2)]
    assert all(w.resting_decoders == 0 for w in recording.works if not w.prefill_tokens)


def test_rescaling_one_factor_multiplies_every_iteration_served_terms_included() -> None:
    served = FittedPerf(LIMITS, LAW, served_decode_seq_s=0.002, served_prefill_factor=0.9)
    work = IterationWork(((100, 63),), decode_seqs=2, decode_context_tokens=300, kv_tokens=0)
    assert served.rescaled(1.25).iteration_s(work) == pytest.approx(1.25 * served.iteration_s(work))
    decode_only = IterationWork((), 8, 800, 800)
    assert served.rescaled(1.25).iteration_s(decode_only) == pytest.approx(1.25 * served.iteration_s(decode_only))


def test_the_host_time_scale_is_the_measured_busy_time_over_the_modelled_one() -> None:
    served = FittedPerf(LIMITS, LAW, served_decode_seq_s=0.002, served_prefill_factor=0.9)
    # 10 decode steps of 4 sequences at context 100, and one 63-token prompt step, as counted.
    steps = [IterationWork((), 4, 400, 400)] * 10 + [IterationWork(((0, 63),), 0, 0, 63)]
    # The counters do not split attention by phase: the served prefill factor applies to the tokens' term only.
    modelled_s = sum(served.iteration_s(w) for w in steps) + 0.1 * LAW.attention_s_per_ktoken * 63 * 62 / 2 / 1000
    busy = EngineBusy(steps=11, step_s=1.3 * modelled_s, prefill_tokens=63, decode_tokens=40,
                      attention_positions=4000 + 63 * 62 / 2)
    assert served.host_time_scale(busy) == pytest.approx(1.3)
    assert EngineBusy.from_json({"steps": 11, "step_s": 1.0, "prefill_tokens": 63, "decode_tokens": 40,
                                 "attention_positions": 5953.0}) == replace(busy, step_s=1.0)
    with pytest.raises(ValueError, match="no steps"):
        served.host_time_scale(replace(busy, steps=0))


def test_a_timed_model_runs_each_iteration_at_the_speed_of_the_window_it_starts_in() -> None:
    timed = TimedPerf(((10.0, PERF), (20.0, PERF.rescaled(2.0))))
    work = IterationWork(((0, 63),), 2, 200, 263)
    assert timed.limits == PERF.limits
    assert timed.iteration_s(replace(work, start_s=5.0)) == PERF.iteration_s(work)
    assert timed.iteration_s(replace(work, start_s=15.0)) == pytest.approx(2 * PERF.iteration_s(work))
    assert timed.iteration_s(replace(work, start_s=99.0)) == pytest.approx(2 * PERF.iteration_s(work))
    with pytest.raises(ValueError, match="time order"):
        TimedPerf(((20.0, PERF), (10.0, PERF)))


def test_the_simulated_engine_tells_the_model_when_each_iteration_starts() -> None:
    slow_later = TimedPerf(((1.0, PERF), (1e9, PERF.rescaled(3.0))))
    early, late = _run(slow_later, [("a", 0.0, 130, 1)]), _run(slow_later, [("b", 5.0, 130, 1)])
    assert late.first["b"] - 5.0 == pytest.approx(3 * early.first["a"])
