"""The loop-lag bench's report: phases (with the gateway's own loop lag, from its histogram) and attacks
summarised, the target judged on the attack's p99."""

from __future__ import annotations

import math

from bench.loop_lag import _attack_summary, _phase, markdown


def test_the_report_summarises_each_attack_kind_and_phase() -> None:
    attacks = _attack_summary([("declared_50mb", 413, 0.002), ("declared_50mb", 413, 0.004),
                               ("no_key_50mb", 401, 0.001)])
    assert attacks["declared_50mb"] == {"requests": 2, "statuses": [413], "refused_p50_ms": 3.0,
                                        "refused_max_ms": 4.0}
    before = {0.001: 10.0, 0.02: 10.0, 0.05: 10.0, math.inf: 10.0}
    after = {0.001: 108.0, 0.02: 109.0, 0.05: 110.0, math.inf: 110.0}  # 98 under 1 ms, 1 under 20, 1 under 50
    quiet = _phase([0.001] * 99 + [0.010], [0.02, 0.03], before, after)
    assert quiet["probe_p99_ms"] is not None and 1.0 <= quiet["probe_p99_ms"] <= 10.0
    assert quiet["premium_embeddings"] == 2
    assert quiet["loop_lag_samples"] == 100 and quiet["loop_lag_p50_ms"] is not None
    assert quiet["loop_lag_p50_ms"] <= 1.0 and quiet["loop_lag_p99_ms"] == 20.0
    table = markdown({"quiet": quiet, "attack": quiet, "attacks": attacks})
    assert "| declared_50mb | 2 | 413 | 3.0 / 4.0 |" in table and "| attack |" in table
