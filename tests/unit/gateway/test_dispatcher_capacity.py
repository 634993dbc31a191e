"""The driver with autoscaling's inputs, in-process against the fake transport: control's replica
states decide which workers take new work, and a model at zero holds its requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from gateway.dispatcher import Dispatcher
from gateway.errors import DeadlineExceededError, UnavailableError
from gateway.metrics import GatewayMetrics
from gateway.outcomes import COMPLETED
from gateway.replicas import gate_views
from gateway.request_status import RequestStatusStore
from scheduling.holding import ColdStart
from scheduling.requests import Request, RequestKind
from scheduling.scheduler import build_scheduler
from settings.capacity_wire import ReplicasDocument, ReplicaState, ReplicaWire
from settings.paths import StackPaths
from settings.scheduling import load_scheduling
from settings.stack import load_stack_config
from settings.tenants import load_tenants
from settings.workers import worker_addresses
from tests.unit.gateway.fake_transport import FakeTransport

MODELS = ("chat", "embed", "rerank", "vision", "tabular")


@dataclass
class Driven:
    dispatcher: Dispatcher
    workers: FakeTransport
    document: list[ReplicasDocument | None]
    cold: list[ColdStart]

    def replicas(self, **states: ReplicaState) -> None:
        """Control's document: ``local-cpu-<i>=state`` per listed slot (all models when ready)."""
        self.document[0] = ReplicasDocument(replicas=tuple(
            ReplicaWire(pool="local-cpu", index=int(name.rsplit("_", 1)[1]), name=name.replace("_", "-"),
                        state=state, models=MODELS) for name, state in states.items()))
        self.dispatcher.refresh_workers()


@pytest.fixture
async def driven() -> AsyncIterator[Driven]:
    paths = StackPaths()
    config = load_stack_config(paths.pools_file, paths.models_file)
    scheduling = load_scheduling(paths.scheduling_file, config)
    workers = FakeTransport(config, addresses=worker_addresses(config, {"local-cpu": 2}))
    workers.down.clear()  # both slots run a Triton that says READY; control's document decides
    profiles = {pool.name: scheduling.profile_of(pool.profile_name) for pool in config.pools}
    document: list[ReplicasDocument | None] = [None]
    cold: list[ColdStart] = []
    driver = Dispatcher(build_scheduler(scheduling.scheduler, scheduling.limits), workers, GatewayMetrics(),
                        RequestStatusStore(), lambda: gate_views(workers.views(profiles), document[0]),
                        cold_starts=lambda now: list(cold))
    await driver.start()
    yield Driven(driver, workers, document, cold)
    await driver.close()


def _request(dispatcher: Dispatcher, request_id: str, model: str = "embed", deadline_in_s: float = 30.0) -> Request:
    tenant = load_tenants(StackPaths().tenants_file).authenticate("demo-standard-key")
    assert tenant is not None
    now = dispatcher.clock()
    return Request(request_id, tenant, model, RequestKind.BATCHED, now, now + deadline_in_s, prefill_tokens=4,
                   model_version=1)


async def test_a_draining_or_starting_replica_gets_no_new_work(driven: Driven) -> None:
    driven.replicas(local_cpu_0=ReplicaState.DRAINING, local_cpu_1=ReplicaState.READY)
    for i in range(3):
        ticket = await driven.dispatcher.acquire(_request(driven.dispatcher, f"a{i}"))
        assert ticket.worker_id == "local-cpu-1"  # Triton says both are ready; control says 0 drains
        ticket.finish(COMPLETED)
    driven.replicas(local_cpu_0=ReplicaState.READY, local_cpu_1=ReplicaState.STARTING)
    for i in range(3):
        ticket = await driven.dispatcher.acquire(_request(driven.dispatcher, f"b{i}"))
        assert ticket.worker_id == "local-cpu-0"  # 1 is loading and warming: none until it is ready
        ticket.finish(COMPLETED)


async def test_in_flight_work_on_a_replica_that_starts_draining_finishes_there(driven: Driven) -> None:
    driven.replicas(local_cpu_0=ReplicaState.READY, local_cpu_1=ReplicaState.DRAINING)
    ticket = await driven.dispatcher.acquire(_request(driven.dispatcher, "running"))
    driven.replicas(local_cpu_0=ReplicaState.DRAINING, local_cpu_1=ReplicaState.READY)
    assert "running" in driven.dispatcher.scheduler.in_flight and driven.workers.has_worker(ticket.worker_id)
    ticket.finish(COMPLETED)
    assert driven.dispatcher.scheduler.in_flight == {}


async def test_without_a_ready_replica_a_model_that_may_not_scale_to_zero_is_refused(driven: Driven) -> None:
    driven.replicas(local_cpu_0=ReplicaState.DRAINING, local_cpu_1=ReplicaState.STARTING)
    with pytest.raises(UnavailableError) as refused:
        await driven.dispatcher.acquire(_request(driven.dispatcher, "nowhere"))
    assert refused.value.code == "no_worker"


async def test_a_held_request_is_dispatched_once_a_replica_is_ready(driven: Driven) -> None:
    driven.cold.append(ColdStart("vision", 5.0))
    driven.workers.unloaded.add("vision")
    driven.dispatcher.refresh_workers()
    waiting = asyncio.ensure_future(driven.dispatcher.acquire(_request(driven.dispatcher, "held", "vision")))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert driven.dispatcher.statuses.get("held", "demo-standard").status == "waiting_for_capacity"  # type: ignore[union-attr]
    driven.workers.unloaded.clear()
    # Triton says READY on both slots; control is still warming 0, and 1 is stopped
    driven.replicas(local_cpu_0=ReplicaState.STARTING, local_cpu_1=ReplicaState.STOPPED)
    await asyncio.sleep(0.05)
    assert not waiting.done()
    driven.replicas(local_cpu_0=ReplicaState.READY, local_cpu_1=ReplicaState.STOPPED)
    ticket = await asyncio.wait_for(waiting, 1.0)
    assert ticket.worker_id == "local-cpu-0"
    assert driven.dispatcher.statuses.get("held", "demo-standard").status == "running"  # type: ignore[union-attr]
    ticket.finish(COMPLETED)


async def test_a_held_request_past_its_deadline_is_504_model_cold_with_retry_after(driven: Driven) -> None:
    driven.cold.append(ColdStart("vision", 0.05))
    driven.workers.unloaded.add("vision")
    driven.dispatcher.refresh_workers()
    started = driven.dispatcher.clock()
    with pytest.raises(DeadlineExceededError) as expired:
        await driven.dispatcher.acquire(_request(driven.dispatcher, "late", "vision", deadline_in_s=0.2))
    assert 0.15 <= driven.dispatcher.clock() - started < 1.0
    assert expired.value.status == 504 and expired.value.code == "model_cold"
    assert expired.value.headers() == {"Retry-After": "1"}
    assert driven.dispatcher.statuses.get("late", "demo-standard").outcome == "expired(model_cold)"  # type: ignore[union-attr]


async def test_a_deadline_before_the_cold_start_is_503_model_cold_at_once(driven: Driven) -> None:
    driven.cold.append(ColdStart("vision", 20.0))
    driven.workers.unloaded.add("vision")
    driven.dispatcher.refresh_workers()
    with pytest.raises(UnavailableError) as refused:
        await driven.dispatcher.acquire(_request(driven.dispatcher, "hurry", "vision", deadline_in_s=2.0))
    assert refused.value.code == "model_cold" and refused.value.headers() == {"Retry-After": "20"}
