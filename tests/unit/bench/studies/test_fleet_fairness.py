"""The fleet-fairness study in virtual time: shared counters give the tenant that reaches only one
gateway its half; without them it gets a quarter."""

from __future__ import annotations

import pytest

from bench.studies.fleet_fairness import SERVICE_S, run


async def test_one_gateway_is_fair() -> None:
    result = await run("one", None, duration_s=5.0)
    assert result.share_a == pytest.approx(0.5, abs=0.01)


async def test_two_gateways_without_shared_counters_starve_the_tenant_on_one_gateway() -> None:
    result = await run("two", None, duration_s=5.0)
    assert result.share_a == pytest.approx(0.25, abs=0.02)


async def test_shared_counters_without_a_lift_grace_are_reset_between_requests() -> None:
    result = await run("two", 0.2, lift_grace_s=0.0, duration_s=5.0)
    assert result.share_a < 0.3


@pytest.mark.parametrize("interval_s", [0.05, 0.2])
async def test_shared_counters_restore_the_fair_share_within_the_interval_bound(interval_s: float) -> None:
    result = await run("two", interval_s, lift_grace_s=2.0, duration_s=5.0)
    assert result.share_a == pytest.approx(0.5, abs=0.05)
    assert result.max_gap_requests <= 2 + 2 * interval_s / SERVICE_S  # a charge + the fleet's service in one interval
