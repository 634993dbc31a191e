"""The step-time law fit: exact recovery on noiseless samples, trimming of slowed steps, no
negative coefficients, and the causal attention count of a chunk."""

from __future__ import annotations

import random

import pytest

from simulator.perf.step_fit import StepLaw, StepSample, chunk_attention_positions, fit_step_law, relative_errors

LAW = StepLaw(overhead_s=0.004, prefill_token_s=0.0028, decode_seq_s=0.005, attention_s_per_ktoken=0.002)


def _samples(law: StepLaw, count: int = 60, seed: int = 0) -> list[StepSample]:
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        prefill, decode = rng.choice((0, rng.randint(1, 63))), rng.randint(0, 16)
        if prefill + decode == 0:
            decode = 1
        attention = chunk_attention_positions(rng.randint(0, 1500), prefill) + decode * rng.randint(10, 900)
        samples.append(StepSample(prefill, decode, attention, law.step_s(prefill, decode, attention)))
    return samples


def test_a_chunk_attends_causally_from_its_start() -> None:
    assert chunk_attention_positions(0, 1) == 0
    assert chunk_attention_positions(10, 1) == 10
    assert chunk_attention_positions(100, 4) == 4 * 100 + 6


def test_the_fit_recovers_the_law_of_noiseless_samples() -> None:
    fitted = fit_step_law(_samples(LAW))
    for name, value in LAW.to_json().items():
        assert fitted.to_json()[name] == pytest.approx(value, rel=1e-6)


def test_steps_slowed_by_other_processes_are_trimmed() -> None:
    samples = _samples(LAW, 80)
    slowed = [StepSample(s.prefill_tokens, s.decode_seqs, s.attention_positions, s.wall_s * 12)
              if i % 10 == 0 else s for i, s in enumerate(samples)]
    fitted = fit_step_law(slowed)
    assert max(abs(e) for e in relative_errors(fitted, samples)) < 0.01
    untrimmed = fit_step_law(slowed, outlier_factor=None)
    assert max(abs(e) for e in relative_errors(untrimmed, samples)) > 0.02


def test_a_term_that_would_be_negative_is_fixed_at_zero() -> None:
    no_attention = StepLaw(0.004, 0.003, 0.005, 0.0)
    samples = [StepSample(s.prefill_tokens, s.decode_seqs, s.attention_positions,
                          s.wall_s - 1e-7 * s.attention_positions) for s in _samples(no_attention)]
    fitted = fit_step_law(samples)
    assert min(fitted.to_json().values()) >= 0.0
    assert fitted.attention_s_per_ktoken == 0.0


def test_too_few_samples_are_refused() -> None:
    with pytest.raises(ValueError):
        fit_step_law(_samples(LAW, 3))


def test_the_law_round_trips_through_json() -> None:
    assert StepLaw.from_json(LAW.to_json()) == LAW


def test_the_busy_time_of_counted_steps_is_the_sum_of_their_laws() -> None:
    law = StepLaw(overhead_s=0.004, prefill_token_s=0.003, decode_seq_s=0.006, attention_s_per_ktoken=0.004)
    steps = [(63, 0, 63 * 62 / 2), (0, 4, 400.0), (10, 3, 900.0)]
    assert law.busy_s(3, 73, 7, sum(a for _, _, a in steps)) == pytest.approx(sum(law.step_s(*s) for s in steps))
