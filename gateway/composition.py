"""The gateway's parts: built once at startup, started in order, stopped in reverse.

``Gateway`` holds them, typed; handlers reach it through ``gateway_of(request)``; functions below
the routes take the part they use, not this. ``running(setup, ...)`` is the composition: the
workers' transport, the state store (embedded, or shared with the other gateways of the fleet),
the scheduler and its driver, admission with the fleet's quotas, the fair-share sync, and the
routing poller of the control plane.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace

from starlette.requests import HTTPConnection

from gateway.admission import AdmissionAdapter
from gateway.catalog import ModelCatalog
from gateway.dispatcher import Dispatcher
from gateway.fair_share import FairShareSync
from gateway.fleet_quotas import FleetQuotas
from gateway.metrics import GatewayMetrics
from gateway.periodic import start_periodic, stop
from gateway.request_status import RequestStatusStore
from gateway.routing import RoutingPoller, RoutingTable
from gateway.state_store.factory import open_state_store
from gateway.state_store.protocol import StateStore
from gateway.tokenization import LlmTokenizer, TextTokenizer
from gateway.transport.protocol import Transport
from scheduling.capacity import CapacityProfile
from scheduling.scheduler import build_scheduler
from settings.gateway import GatewaySettings
from settings.scheduling import SchedulingSettings
from settings.stack import StackConfig
from settings.tenants import TenantDirectory

TransportFactory = Callable[[StackConfig, float], Transport]


@dataclass(frozen=True)
class Gateway:
    models: ModelCatalog
    tenants: TenantDirectory
    transport: Transport
    dispatcher: Dispatcher
    admission: AdmissionAdapter
    routing: RoutingTable
    scheduling: SchedulingSettings
    metrics: GatewayMetrics
    store: StateStore
    settings: GatewaySettings
    gateway_id: str


@dataclass(frozen=True)
class GatewaySetup:
    """What ``create_app`` read from the configuration, once."""

    config: StackConfig
    scheduling: SchedulingSettings
    tenants: TenantDirectory
    settings: GatewaySettings
    llm_tokenizers: dict[str, LlmTokenizer]
    text_tokenizers: dict[str, TextTokenizer]
    profiles: dict[str, CapacityProfile]  # by pool name
    metrics: GatewayMetrics


_background: set[asyncio.Future[None]] = set()


def _routes_changed(gateway: Gateway) -> None:
    """New routes may name versions the readiness poll has not seen yet: re-read the workers now."""
    gateway.metrics.routing_generation.set(gateway.routing.generation)
    task = asyncio.ensure_future(gateway.transport.refresh())
    _background.add(task)
    task.add_done_callback(_background.discard)


def gateway_of(connection: HTTPConnection) -> Gateway:
    gateway: Gateway = connection.app.state.gateway
    return gateway


def new_gateway_id() -> str:
    """This process among the fleet's gateways: host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


@asynccontextmanager
async def running(setup: GatewaySetup, transport: TransportFactory, poll_interval_s: float,
                  routing_url: str | None, admin_token: Callable[[], str]) -> AsyncIterator[Gateway]:
    """Build and start every part; stop them in reverse order on exit."""
    settings, metrics = setup.settings, setup.metrics
    async with AsyncExitStack() as parts:
        gateway_id = new_gateway_id()
        store = open_state_store(settings.state_store, settings.store_timeout_s)
        await store.start()
        parts.push_async_callback(store.close)
        workers = transport(setup.config, poll_interval_s)
        shared = store if settings.shared else None
        scheduler_config = setup.scheduling.scheduler
        if shared is not None:  # counters shared: a tenant between requests keeps its fleet-wide counter
            scheduler_config = replace(scheduler_config, lift_grace_s=settings.fair_share_lift_grace_s)
        scheduler = build_scheduler(scheduler_config, setup.scheduling.limits)
        statuses = RequestStatusStore(gateway=gateway_id, shared=shared, ttl_s=settings.status_ttl_s,
                                      flush_interval_s=settings.status_flush_interval_s)
        dispatcher = Dispatcher(scheduler, workers, metrics, statuses, lambda: workers.views(setup.profiles))
        quotas = (FleetQuotas(store, metrics, settings.quota_lease_s, flush_interval_s=settings.status_flush_interval_s)
                  if shared is not None else None)
        if quotas is not None:
            dispatcher.on_ended.append(quotas.release)
            parts.push_async_callback(quotas.close)
        routing = RoutingTable.from_config(setup.config)
        gateway = Gateway(
            models=ModelCatalog(setup.config, workers, setup.llm_tokenizers, setup.text_tokenizers),
            tenants=setup.tenants, transport=workers, dispatcher=dispatcher,
            admission=AdmissionAdapter(dispatcher, setup.scheduling.slo, routing, quotas,
                                       max_attempts=settings.worker_attempts), routing=routing,
            scheduling=setup.scheduling, metrics=metrics, store=store, settings=settings, gateway_id=gateway_id)
        await workers.start()
        parts.push_async_callback(workers.close)
        workers.on_refresh.append(dispatcher.refresh_workers)
        await dispatcher.start()
        parts.push_async_callback(dispatcher.close)
        if shared is not None:
            fair_share = FairShareSync(scheduler, shared, gateway_id)
            task = start_periodic(fair_share.sync, settings.fair_share_interval_s, "fair-share")
            parts.push_async_callback(stop, task)
        if routing_url is not None:
            routing.on_change.append(lambda: _routes_changed(gateway))
            poller = RoutingPoller(routing, routing_url, admin_token())
            await poller.start()
            parts.push_async_callback(poller.close)
        yield gateway
