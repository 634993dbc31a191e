"""The served path terms from idle single requests (``bench.studies.served_ttft``): the fixed latency and
the served prefill factor against the engine-alone law, and the probes and metrics they come from."""

from __future__ import annotations

import random
from dataclasses import asdict

import pytest

from bench.studies.served_ttft import (
    BACKGROUND_SETTLE_S,
    MIN_SAMPLES,
    PathProbe,
    gateway_sums,
    loaded_check,
    probe_items,
    served_path_terms,
    simulated_loaded_ttft_s,
)
from simulator.perf.fitted import FittedPerf
from simulator.perf.protocol import EngineLimits
from simulator.perf.step_fit import StepLaw
from simulator.served_path import NO_PATH, ServedPath

LAW = StepLaw(overhead_s=0.007, prefill_token_s=0.003, decode_seq_s=0.004, attention_s_per_ktoken=0.003)
PERF = FittedPerf(EngineLimits(16, 63, 63, 8192, short_prefill_first=True), LAW)
LENGTHS = (29, 63, 64, 128, 256, 448, 700)


def _probes(ttft_of: object, noise_s: float = 0.0, repeats: int = 5, share: float = 0.0) -> list[PathProbe]:
    rng = random.Random(3)
    probes = []
    for index in range(repeats * len(LENGTHS)):
        tokens = LENGTHS[index % len(LENGTHS)]
        ttft = ttft_of(tokens) + rng.uniform(-noise_s, noise_s)  # type: ignore[operator]
        probes.append(PathProbe(f"p{index}", tokens, 200, ttft, ttft - 0.003, 0.0002, 4, share))
    return probes


def test_a_constant_extra_over_the_law_is_the_path_and_the_factor_stays_one() -> None:
    terms = served_path_terms(PERF, _probes(lambda n: 0.02 + PERF.prefill_s(n), noise_s=0.004))
    assert terms["prefill_factor"] == 1.0
    assert terms["path_s"] == pytest.approx(0.02, abs=0.002)
    assert not terms["fit"]["factor_differs_from_1"]


def test_a_slower_served_prefill_is_a_factor_on_the_prefill_work_only() -> None:
    def ttft(tokens: int) -> float:
        overhead_s, work_s = PERF.prefill_split_s(tokens)
        return 0.01 + overhead_s + 1.3 * work_s

    terms = served_path_terms(PERF, _probes(ttft, noise_s=0.003))
    assert terms["prefill_factor"] == pytest.approx(1.3, abs=0.02)
    assert terms["path_s"] == pytest.approx(0.01, abs=0.005)


def test_a_negative_path_is_none() -> None:
    terms = served_path_terms(PERF, _probes(lambda n: PERF.prefill_s(n) - 0.01))
    assert terms["path_s"] == 0.0


def test_probes_slowed_by_other_processes_are_left_out_and_too_few_are_refused() -> None:
    quiet = _probes(lambda n: 0.02 + PERF.prefill_s(n), repeats=2)
    busy = _probes(lambda n: 5.0 + PERF.prefill_s(n), repeats=2, share=0.5)
    terms = served_path_terms(PERF, quiet + busy)
    assert terms["path_s"] == pytest.approx(0.02) and terms["fit"]["left_out"] == len(busy)
    with pytest.raises(ValueError, match="quiet answered probes"):
        served_path_terms(PERF, quiet[: MIN_SAMPLES - 1] + busy)


def test_the_gateway_metrics_sum_the_chat_models_histograms_of_the_probes_tier() -> None:
    text = "\n".join([
        "# TYPE shunter_time_to_first_token_seconds histogram",
        'shunter_time_to_first_token_seconds_sum{model="chat",tier="standard"} 1.5',
        'shunter_time_to_first_token_seconds_sum{model="chat",tier="standard",x="y"} 0.5',
        'shunter_time_to_first_token_seconds_sum{model="chat",tier="batch"} 7.0',
        'shunter_time_to_first_token_seconds_sum{model="other",tier="batch"} 9.0',
        "# TYPE shunter_queue_wait_seconds histogram",
        'shunter_queue_wait_seconds_sum{model="chat",tier="standard"} 0.25', ""])
    assert gateway_sums(text) == {"ttft_s": 2.0, "queue_s": 0.25}


class WordTokenizer:
    """One token per word of the rendered conversation (enough to size prompts)."""

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return " ".join(m["content"] for m in messages)

    def count(self, text: str) -> int:
        return len(text.split())


def test_probes_are_every_length_per_round_each_with_its_own_leading_id() -> None:
    items = probe_items(WordTokenizer(), [30, 60], repeats=3, seed=0)  # type: ignore[arg-type]
    assert sorted(i["target_prompt_tokens"] for i in items) == [30, 30, 30, 60, 60, 60]
    assert [i["round"] for i in items] == [0, 0, 1, 1, 2, 2]
    assert all(i["prompt_tokens"] >= i["target_prompt_tokens"] for i in items)
    systems = [i["messages"][0]["content"] for i in items]
    assert len({s.split()[1][:3] for s in systems}) == len(items)  # ids differ in their first characters


def test_a_loaded_probe_alone_is_its_prefill_and_the_path_and_background_decodes_delay_it() -> None:
    path = ServedPath(0.02)
    alone = simulated_loaded_ttft_s(PERF, path, 40, background_streams=0, background_context_tokens=100, phases=3)
    assert alone == pytest.approx([PERF.prefill_s(40) + 0.02] * 3)
    loaded = simulated_loaded_ttft_s(PERF, path, 40, background_streams=4, background_context_tokens=100, phases=5)
    step_s = PERF.decode_step_s(4, 100)
    # it waits for the decode step in progress (less than one), then runs its own short-prefill step
    assert all(alone[0] < t <= alone[0] + 1.3 * step_s for t in loaded)  # context grew past 100
    assert len(set(loaded)) > 1  # the arrival phases differ


def test_a_loaded_probe_comes_after_the_background_is_prefilled_however_slow_that_is() -> None:
    slow = FittedPerf(PERF.limits, StepLaw(overhead_s=0.007, prefill_token_s=0.02, decode_seq_s=0.004,
                                           attention_s_per_ktoken=0.003))
    assert BACKGROUND_SETTLE_S < 4 * 200 * 0.02  # the background's prompts take longer than the settle time
    alone = simulated_loaded_ttft_s(slow, NO_PATH, 40, background_streams=0, background_context_tokens=200, phases=1)
    loaded = simulated_loaded_ttft_s(slow, NO_PATH, 40, background_streams=4, background_context_tokens=200, phases=4)
    assert all(alone[0] < t <= alone[0] + 1.3 * slow.decode_step_s(4, 200) for t in loaded)


def test_the_loaded_check_compares_medians_per_length_of_quiet_probes() -> None:
    probes = [PathProbe(f"L{i}", 40, 200, 0.3, 0.29, 0.0002, 4, 0.0) for i in range(3)]
    busy = PathProbe("Lbusy", 40, 200, 9.0, 9.0, 0.0002, 4, 0.9)
    raw = {"background": {"streams": 4, "prompt_tokens": 40, "max_tokens": 120},
           "loaded_probes": [asdict(p) for p in [*probes, busy]]}
    rows = loaded_check(PERF, NO_PATH, raw)
    assert list(rows) == ["40"] and rows["40"]["samples"] == 3 and rows["40"]["real_ttft_s"] == 0.3
    assert rows["40"]["sim_over_real"] == pytest.approx(rows["40"]["sim_ttft_s"] / 0.3)
