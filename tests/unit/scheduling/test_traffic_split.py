"""The weighted version split: deterministic, proportional, minimal movement, sticky per tenant."""

from __future__ import annotations

import pytest

from scheduling.traffic_split import StickyTo, TrafficSplit


def test_observed_share_over_distinct_requests_matches_the_weights() -> None:
    split = TrafficSplit("embed", {2: 90.0, 3: 10.0})
    chosen = [split.choose(f"req_{i}", "acme") for i in range(20_000)]
    assert abs(chosen.count(3) / len(chosen) - 0.10) < 0.01


def test_the_same_request_id_always_lands_on_the_same_version() -> None:
    split = TrafficSplit("embed", {2: 50.0, 3: 50.0})
    assert {split.choose("req_fixed", "t") for _ in range(10)} == {split.choose("req_fixed", "t")}


def test_raising_the_canary_weight_moves_only_baseline_keys_to_the_canary() -> None:
    small, large = TrafficSplit("m", {1: 90.0, 2: 10.0}), TrafficSplit("m", {1: 70.0, 2: 30.0})
    keys = [f"req_{i}" for i in range(5000)]
    assert all(large.choose(k, "t") == 2 for k in keys if small.choose(k, "t") == 2)


def test_sticky_to_tenant_gives_each_tenant_one_variant() -> None:
    split = TrafficSplit("m", {2: 50.0, 3: 50.0}, StickyTo.TENANT)
    for tenant in ("acme", "globex", "initech"):
        assert len({split.choose(f"req_{i}", tenant) for i in range(200)}) == 1
    assert {split.choose("r", f"tenant-{i}") for i in range(100)} == {2, 3}


def test_sticky_to_user_keeps_each_end_user_on_one_variant_and_spreads_one_tenants_users() -> None:
    split = TrafficSplit("m", {2: 50.0, 3: 50.0}, StickyTo.USER)
    for user in ("u1", "u2", "u3"):
        assert len({split.choose(f"req_{i}", "acme", user) for i in range(200)}) == 1
    chosen = [split.choose("r", "acme", f"user-{i}") for i in range(4000)]
    assert abs(chosen.count(3) / len(chosen) - 0.5) < 0.03  # one tenant's users split by the weights
    no_user = {split.choose(f"req_{i}", "acme", None) for i in range(200)}
    assert no_user == {TrafficSplit("m", {2: 50.0, 3: 50.0}, StickyTo.TENANT).choose("r", "acme")}


def test_a_zero_weight_version_is_live_but_gets_no_traffic() -> None:
    split = TrafficSplit("m", {2: 100.0, 3: 0.0})
    assert split.versions == {2, 3}
    assert {split.choose(f"req_{i}", "t") for i in range(1000)} == {2}


@pytest.mark.parametrize("weights", [{}, {1: 60.0, 2: 30.0}, {1: 110.0, 2: -10.0}])
def test_bad_weights_are_refused(weights: dict[int, float]) -> None:
    with pytest.raises(ValueError):
        TrafficSplit("m", weights)
