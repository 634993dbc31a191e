"""The asyncio driver of the scheduling core, with the real core and configuration and a fake
transport: tickets, exactly one ending per request, expiry, departures, a vanished worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.dispatcher import Dispatcher
from gateway.errors import DeadlineExceededError, InvalidRequestError, UnavailableError
from gateway.metrics import GatewayMetrics
from gateway.outcomes import COMPLETED
from gateway.request_status import RequestStatusStore
from scheduling.requests import Request, RequestKind
from scheduling.scheduler import build_scheduler
from settings.paths import StackPaths
from settings.scheduling import load_scheduling
from settings.stack import load_stack_config
from settings.tenants import load_tenants
from tests.unit.gateway.fake_transport import FakeTransport


@pytest.fixture
async def dispatcher() -> AsyncIterator[Dispatcher]:
    paths = StackPaths()
    config = load_stack_config(paths.pools_file, paths.models_file)
    scheduling = load_scheduling(paths.scheduling_file, config)
    workers = FakeTransport(config)
    profiles = {pool.name: scheduling.profile_of(pool.profile_name) for pool in config.pools}
    driver = Dispatcher(build_scheduler(scheduling.scheduler, scheduling.limits), workers, GatewayMetrics(),
                        RequestStatusStore(), lambda: workers.views(profiles))
    await driver.start()
    yield driver
    await driver.close()


def _request(dispatcher: Dispatcher, request_id: str, key: str = "demo-batch-key", rows: int = 1,
             deadline_in_s: float = 30.0) -> Request:
    tenant = load_tenants(StackPaths().tenants_file).authenticate(key)
    assert tenant is not None
    now = dispatcher.clock()
    return Request(request_id, tenant, "embed", RequestKind.BATCHED, now, now + deadline_in_s, prefill_tokens=4,
                   rows=rows, model_version=1)


async def test_an_admitted_request_gets_a_ticket_and_its_finish_frees_the_worker(dispatcher: Dispatcher) -> None:
    ticket = await dispatcher.acquire(_request(dispatcher, "r1"))
    assert ticket.worker_id == "local-cpu-0"
    assert dispatcher.statuses.get("r1", "demo-batch").status == "running"  # type: ignore[union-attr]
    assert "r1" in dispatcher.scheduler.in_flight
    ticket.finish(COMPLETED)
    ticket.finish(COMPLETED)  # a second finish does nothing
    assert dispatcher.scheduler.in_flight == {}
    assert dispatcher.statuses.get("r1", "demo-batch").outcome == "completed"  # type: ignore[union-attr]


async def test_finishing_ends_the_ticket_with_the_errors_ending(dispatcher: Dispatcher) -> None:
    ticket = await dispatcher.acquire(_request(dispatcher, "r2"))
    with pytest.raises(InvalidRequestError), ticket.finishing():
        raise InvalidRequestError("bad input", code="invalid_input")
    assert dispatcher.statuses.get("r2", "demo-batch").outcome == "rejected(invalid_input)"  # type: ignore[union-attr]
    ticket = await dispatcher.acquire(_request(dispatcher, "r3"))
    with pytest.raises(RuntimeError), ticket.finishing():
        raise RuntimeError("a bug")
    assert dispatcher.statuses.get("r3", "demo-batch").outcome == "failed(internal_error)"  # type: ignore[union-attr]
    assert dispatcher.scheduler.in_flight == {}


async def test_a_queued_request_expires_at_its_deadline_without_reaching_a_worker(dispatcher: Dispatcher) -> None:
    holder = await dispatcher.acquire(_request(dispatcher, "big", rows=128))  # the batch tier's share of embed
    started = dispatcher.clock()
    with pytest.raises(DeadlineExceededError):
        await dispatcher.acquire(_request(dispatcher, "late", deadline_in_s=0.05))
    assert 0.04 <= dispatcher.clock() - started < 1.0
    assert dispatcher.statuses.get("late", "demo-batch").outcome == "expired(deadline_exceeded)"  # type: ignore[union-attr]
    holder.finish(COMPLETED)


async def test_a_waiter_whose_client_leaves_is_taken_out_of_the_queue(dispatcher: Dispatcher) -> None:
    holder = await dispatcher.acquire(_request(dispatcher, "big", rows=128))
    gone = asyncio.Event()
    waiter = asyncio.ensure_future(dispatcher.acquire(_request(dispatcher, "leaver"), gone.wait))
    await asyncio.sleep(0.01)
    assert [q.request_id for q in dispatcher.scheduler.queue.queued()] == ["leaver"]
    gone.set()
    with pytest.raises(Exception, match="closed the connection"):
        await waiter
    assert list(dispatcher.scheduler.queue.queued()) == []
    assert dispatcher.statuses.get("leaver", "demo-batch").outcome == "cancelled"  # type: ignore[union-attr]
    holder.finish(COMPLETED)


async def test_a_dispatch_to_a_worker_that_vanished_is_503_and_holds_no_budget(dispatcher: Dispatcher) -> None:
    workers = dispatcher.transport
    assert isinstance(workers, FakeTransport)
    workers.addresses = []  # gone from the transport, still in the scheduler's last view
    with pytest.raises(UnavailableError) as raised:
        await dispatcher.acquire(_request(dispatcher, "r4"))
    assert raised.value.code == "worker_gone"
    assert dispatcher.scheduler.in_flight == {}
    assert dispatcher.statuses.get("r4", "demo-batch").outcome == "rejected(worker_gone)"  # type: ignore[union-attr]
