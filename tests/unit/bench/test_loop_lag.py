"""The loop-lag bench's report: phases and attacks summarised, the target judged on the attack's p99."""

from __future__ import annotations

from bench.loop_lag import _attack_summary, _phase, markdown


def test_the_report_summarises_each_attack_kind_and_phase() -> None:
    attacks = _attack_summary([("declared_50mb", 413, 0.002), ("declared_50mb", 413, 0.004),
                               ("no_key_50mb", 401, 0.001)])
    assert attacks["declared_50mb"] == {"requests": 2, "statuses": [413], "refused_p50_ms": 3.0,
                                        "refused_max_ms": 4.0}
    quiet = _phase([0.001] * 99 + [0.010], [0.02, 0.03])
    assert quiet["probe_p99_ms"] is not None and 1.0 <= quiet["probe_p99_ms"] <= 10.0
    assert quiet["premium_embeddings"] == 2
    table = markdown({"quiet": quiet, "attack": quiet, "attacks": attacks})
    assert "| declared_50mb | 2 | 413 | 3.0 / 4.0 |" in table and "| attack |" in table
