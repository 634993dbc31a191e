"""The gateway's side of autoscaling: which models hold requests at zero, their predicted cold
starts, and the signals the capacity controller reads (``gateway/capacity.py``)."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from prometheus_client import generate_latest

from gateway.capacity import CapacityPlan, CapacitySignals
from gateway.metrics import GatewayMetrics
from scheduling.autoscaling import AutoscalingConfig, ModelPolicy
from scheduling.holding import ColdStart
from scheduling.requests import Request, RequestKind
from scheduling.scheduler import SchedulerConfig, build_scheduler
from scheduling.workers import ModelLimits
from settings.capacity_wire import ReplicasDocument, ReplicaState, ReplicaWire
from settings.stack import StackConfig
from tests.unit.scheduling.factories import BIG, tenant, view

STACK = StackConfig.model_validate({
    "triton": {},
    "pools": [{"name": "eu-cpu", "region": "eu", "models": ["chat", "vision"], "base_port": 9000},
              {"name": "us-cpu", "region": "us", "models": ["vision"], "base_port": 9100}],
    "models": [{"name": "chat", "kind": "llm", "context_tokens": 4096},
               {"name": "vision", "kind": "vision", "token_cost_factor": 50.0}],
})
POLICY = AutoscalingConfig(MappingProxyType({}), MappingProxyType({
    "chat": ModelPolicy("chat", 2.0, 4.0), "vision": ModelPolicy("vision", 2.0, 4.0, scale_to_zero=True, idle_s=60)}))
LIMITS = {"chat": ModelLimits("chat", RequestKind.LLM), "vision": ModelLimits("vision", RequestKind.BATCHED, 8)}


def test_only_models_configured_to_scale_to_zero_hold_their_requests() -> None:
    plan = CapacityPlan.build(STACK, POLICY, cold_start_s=7.0)
    assert plan.scale_to_zero == {"vision"}
    assert CapacityPlan.build(STACK).scale_to_zero == frozenset()  # no capacity.yaml: nothing held
    (cold,) = plan.cold_starts(None, now=100.0)
    assert cold == ColdStart("vision", 7.0, None, frozenset({"eu", "us"}))


def test_control_predicts_the_cold_start_and_a_starting_replica_shortens_the_wait() -> None:
    plan = CapacityPlan.build(STACK, POLICY, cold_start_s=7.0)
    document = ReplicasDocument(cold_start_s={"vision": 12.0}, replicas=(
        ReplicaWire(pool="us-cpu", index=1, name="us-cpu-1", state=ReplicaState.STARTING, since_s=5.0),
        ReplicaWire(pool="us-cpu", index=0, name="us-cpu-0", state=ReplicaState.STARTING, since_s=2.0)))
    (cold,) = plan.cold_starts(document, now=100.0)
    assert cold.cold_start_s == 12.0 and cold.starting_since_s == 95.0  # the earliest start
    assert cold.ready_at_s(100.0) == pytest.approx(107.0)


def _request(request_id: str, model: str, regions: tuple[str, ...] = (), prefill: int = 0, output: int = 0,
             rows: int = 1) -> Request:
    kind = RequestKind.LLM if model == "chat" else RequestKind.BATCHED
    return Request(request_id, tenant(request_id, regions=regions), model, kind, 0.0, 60.0, prefill, output, rows,
                   cost_factor=50.0 if model == "vision" else 1.0)


def test_signals_count_pending_tokens_once_per_model_and_in_flight_tokens_on_their_pool() -> None:
    plan = CapacityPlan.build(STACK, POLICY)
    metrics = GatewayMetrics()
    scheduler = build_scheduler(SchedulerConfig(), LIMITS)
    scheduler.update_workers([view("eu-cpu-0", BIG, "eu", pool="eu-cpu", models=("chat",))])
    scheduler.update_cold_starts(plan.cold_starts(None, 0.0))
    scheduler.submit(_request("c1", "chat", prefill=100, output=50), now=0)
    assert len(scheduler.schedule(now=0).dispatches) == 1  # in flight on eu-cpu
    scheduler.submit(_request("v-any", "vision", rows=2), now=0)  # held; either pool: split in two
    scheduler.submit(_request("v-us", "vision", regions=("us",)), now=0)  # held; only us-cpu
    CapacitySignals(metrics, plan).publish(scheduler)

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert sample("shunter_capacity_inflight_tokens", pool="eu-cpu", model="chat") == 150
    assert sample("shunter_capacity_pending_tokens", pool="eu-cpu", model="chat", kind="prompt") == 0
    assert sample("shunter_capacity_pending_tokens", pool="eu-cpu", model="vision", kind="prompt") == 50
    assert sample("shunter_capacity_pending_tokens", pool="us-cpu", model="vision", kind="prompt") == 100
    assert sample("shunter_capacity_pending_tokens", pool="us-cpu", model="vision", kind="output") == 0
    assert sample("shunter_capacity_held_requests", model="vision") == 2
    assert sample("shunter_capacity_held_requests", model="chat") == 0
    assert sample("shunter_capacity_held_region_requests", model="vision", region="us") == 2
    assert sample("shunter_capacity_held_region_requests", model="vision", region="eu") == 1  # v-us may not
    text = generate_latest(metrics.registry).decode()
    assert 'pool="us-cpu"' in text and "v-any" not in text  # labels are configured names only


def test_arrivals_count_prompt_and_reserved_output_tokens() -> None:
    metrics = GatewayMetrics()
    signals = CapacitySignals(metrics, CapacityPlan.build(STACK, POLICY))
    signals.arrived(_request("c1", "chat", prefill=100, output=50))
    signals.arrived(_request("c2", "chat", prefill=10, output=5))
    assert metrics.registry.get_sample_value("shunter_capacity_arrived_tokens_total",
                                             {"model": "chat", "kind": "prompt"}) == 110
    assert metrics.registry.get_sample_value("shunter_capacity_arrived_tokens_total",
                                             {"model": "chat", "kind": "output"}) == 55
    assert metrics.registry.get_sample_value("shunter_capacity_tenant_tokens_total",
                                             {"model": "chat", "tenant": "c1"}) == 150  # the tenant's name
