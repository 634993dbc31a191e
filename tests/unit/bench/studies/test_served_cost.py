"""The served per-token term derived from a bench.continuous summary (``bench.studies.served_cost``)."""

import pytest

from bench.studies.served_cost import served_decode_from_gaps, served_decode_seq_s
from simulator.perf.fitted import FittedPerf
from simulator.perf.protocol import EngineLimits
from simulator.perf.step_fit import StepLaw

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


def _run(streams: int, spans: list[list[float]], tails_ms: list[float], others: float = 0.0) -> dict[str, object]:
    return {"streams": streams, "repeat": 0, "spans": spans, "tail_ms": tails_ms, "others_share": others,
            "completion_tokens_p50": 30, "generations": len(spans)}


def test_the_gap_term_is_what_each_streaming_sequence_adds_to_the_law_step() -> None:
    # 4 sequences decode (law: 5 + 4 x 5 = 25 ms per step); served each step took 33 ms over 20
    # gaps: 8 ms / 4 = 2 ms per sequence. No prefill steps inside the span.
    report = {"served": [_run(4, [[20 * 0.033, 20.0, 4.0, 0.0]], [])]}
    served = served_decode_from_gaps(PERF, report, prompt_tokens=40)
    assert served["decode_seq_s"] == pytest.approx(0.002)
    assert served["method"] == "gaps"


def test_prefill_steps_inside_a_span_are_the_law_s_and_resting_decoders_pay_the_term() -> None:
    # The same, plus 2 one-token prefill steps inside the span (law: 5 + 3 = 8 ms each, and 3
    # resting decoders at 2 ms each): span = 20 x 33 + 2 x (8 + 6) ms.
    span_s = 20 * 0.033 + 2 * (0.008 + 3 * 0.002)
    served = served_decode_from_gaps(PERF, {"served": [_run(4, [[span_s, 20.0, 4.0, 2.0]], [])]}, prompt_tokens=40)
    assert served["decode_seq_s"] == pytest.approx(0.002)


def test_contended_runs_are_left_out_and_the_end_path_is_the_tail_past_the_last_step() -> None:
    # 1 stream: the law's decode step is 10 ms; tails of 11 and 13 ms leave 1 and 3 ms of path.
    quiet = _run(1, [[20 * 0.011, 20.0, 1.0, 0.0]], [11.0, 13.0])
    busy = _run(1, [[20 * 0.050, 20.0, 1.0, 0.0]], [50.0], others=0.4)
    served = served_decode_from_gaps(PERF, {"served": [quiet, busy]}, prompt_tokens=40)
    assert served["decode_seq_s"] == pytest.approx(0.001)
    assert served["end_path_s"] == pytest.approx(0.002)
    assert served["runs_left_out"] == 1


def test_a_report_without_spans_is_refused_by_the_gap_method() -> None:
    with pytest.raises(ValueError, match="no quiet run"):
        served_decode_from_gaps(PERF, {"served": [{"streams": 1, "repeat": 0}]}, prompt_tokens=40)
