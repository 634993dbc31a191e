"""The served per-token term derived from a bench.continuous summary (``bench.served_cost``)."""

import pytest

from bench.served_cost import served_decode_seq_s
from simulator.fitted_perf import FittedPerf
from simulator.perf_model import EngineLimits
from simulator.step_fit import StepLaw

LAW = StepLaw(overhead_s=0.005, prefill_token_s=0.003, decode_seq_s=0.005, attention_s_per_ktoken=0.0)
PERF = FittedPerf(EngineLimits(16, 63, 63, 8192), LAW)


def test_the_extra_per_sequence_is_the_served_step_minus_the_law_over_the_streams() -> None:
    # The law steps 8 sequences in 45 ms; served at 100 tokens/s a step of 8 takes 80 ms: 35 / 8 ms each.
    summary = [{"streams": 8, "served_tokens_per_s": 100.0}]
    served = served_decode_seq_s(PERF, summary, prompt_tokens=40, completion_tokens=30)
    assert served["decode_seq_s"] == pytest.approx(0.035 / 8)
    assert served["context_tokens"] == 55


def test_a_served_rate_faster_than_the_engine_alone_gives_no_negative_cost() -> None:
    served = served_decode_seq_s(PERF, [{"streams": 1, "served_tokens_per_s": 1000.0}], 40, 30)
    assert served["decode_seq_s"] == 0.0


def test_a_report_without_throughput_is_refused() -> None:
    with pytest.raises(ValueError, match="no served throughput"):
        served_decode_seq_s(PERF, [{"streams": 8, "served_tokens_per_s": 0.0}], 40, 30)
