import pytest

from scheduling.prediction.queued_work import QueuedWork
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import request, tenant

HEAVY, LIGHT = tenant("heavy"), tenant("light")


def _queue(fair: bool) -> QueuedWork:
    work = QueuedWork(fair=fair)
    for _ in range(10):
        work.add(request(HEAVY), 100.0)
    return work


def test_a_light_tenant_is_not_predicted_to_wait_behind_a_heavy_tenants_whole_backlog() -> None:
    assert _queue(fair=True).ahead_of(request(LIGHT), 100.0).units == pytest.approx(100.0)  # one turn of the heavy one


def test_without_fairness_the_whole_tier_backlog_is_ahead() -> None:
    assert _queue(fair=False).ahead_of(request(LIGHT), 100.0).units == pytest.approx(1000.0)


def test_a_tenant_waits_for_its_own_earlier_requests_and_every_higher_tier() -> None:
    work = _queue(fair=True)
    work.add(request(tenant("gold", Tier.PREMIUM)), 50.0)
    assert work.ahead_of(request(HEAVY), 100.0).units == pytest.approx(1050.0)


def test_a_heavier_weight_is_served_in_proportion() -> None:
    work = _queue(fair=True)
    assert work.ahead_of(request(tenant("half", weight=0.5)), 100.0).units == pytest.approx(200.0)


def test_removed_work_is_no_longer_ahead() -> None:
    work = QueuedWork()
    queued = request(HEAVY)
    work.add(queued, 300.0)
    work.remove(queued.request_id)
    assert work.ahead_of(request(LIGHT), 10.0).units == 0.0
