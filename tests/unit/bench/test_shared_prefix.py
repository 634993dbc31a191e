from bench.shared_prefix import summarize
from bench.triton_stats import ENGINE_COUNTERS


def test_outcomes_are_counted_and_only_answered_requests_give_a_ttft() -> None:
    results = [("ok", 0.1), ("ok", 0.3), ("ok", 0.2), ("http 503 predicted_slo_miss", None),
               ("http 503 predicted_slo_miss", None), ("http 504 deadline_exceeded", None), ("ok", None)]
    grown = {**dict.fromkeys(ENGINE_COUNTERS, 0.0), "prefill_tokens": 900.0, "prefix_hit_tokens": 2100.0}
    figures = summarize(results, grown)
    assert figures["outcomes"] == {"ok": 4, "http 503 predicted_slo_miss": 2, "http 504 deadline_exceeded": 1}
    assert figures["ttft_p50_s"] == 0.2 and figures["ttft_max_s"] == 0.3 and figures["within_ttft"] == 3
    assert summarize(results, grown, ttft_slo_s=0.25)["within_ttft"] == 2
    assert figures["engine_prefill_tokens"] == 900.0 and figures["engine_prefix_hit_tokens"] == 2100.0


def test_nothing_answered_gives_no_ttft_and_no_engine_figures_without_counters() -> None:
    figures = summarize([("ReadTimeout", None)], None)
    assert figures == {"outcomes": {"ReadTimeout": 1}, "ttft_p50_s": None, "ttft_max_s": None, "within_ttft": 0}

