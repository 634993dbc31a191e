"""The ``Predictor``: the one object the scheduler, admission and placement ask."""

from __future__ import annotations

import pytest

from scheduling.placement.round_robin import round_robin_placement
from scheduling.prediction.predictor import Predictor
from scheduling.requests import RequestKind
from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.workers import ModelLimits
from tests.unit.scheduling.factories import LIMITS, request, tenant


def test_the_scheduler_and_every_plugin_of_its_placement_ask_one_predictor() -> None:
    scheduler = build_scheduler(SchedulerConfig(), LIMITS)
    placement = scheduler.placement
    plugins = [*placement.soft_filters, *(scorer for scorers in placement.weights.values() for scorer, _ in scorers)]
    asking = [plugin for plugin in plugins if hasattr(plugin, "predictor")]
    assert asking and all(plugin.predictor is scheduler.predictor for plugin in asking)
    assert placement.predictor is scheduler.predictor
    baseline = build_scheduler(SchedulerConfig(Policy.FIFO), LIMITS, placement=round_robin_placement)
    assert baseline.placement.predictor is baseline.predictor


def test_a_queued_request_is_ahead_of_a_later_one_until_it_leaves_the_queue() -> None:
    predictor = Predictor()
    who = tenant()
    first, later = request(who, prefill=100, output=50), request(who, prefill=10, output=10)
    predictor.queued(first, [])
    assert predictor.work_ahead(later).units == pytest.approx(150.0)
    assert predictor.work_ahead(later).prefill_tokens == pytest.approx(100.0)
    predictor.dequeued(first.request_id)
    assert predictor.work_ahead(later).units == 0.0


def test_the_output_requests_generate_lowers_their_expected_cost_and_an_on_demand_kv_claim() -> None:
    predictor = Predictor()
    on_demand = ModelLimits("chat", RequestKind.LLM, kv_on_demand=True)
    served = request(tenant(), prefill=100, output=100)
    assert predictor.expected_units(served) == 200.0 and predictor.output_share(on_demand) == 0.5
    predictor.completed(served, generated_tokens=0)  # the smoothed share of max_tokens falls from 1 to 0.8
    assert predictor.expected_units(served) == pytest.approx(180.0)
    assert predictor.output_share(on_demand) == pytest.approx(0.4)
    assert predictor.output_share(LIMITS["chat"]) == 1.0  # KV reserved up front: the whole output counts
