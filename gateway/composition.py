"""The gateway's parts: built once at startup, started in order, stopped in reverse.

``Gateway`` holds them, typed; handlers reach it through ``gateway_of(request)``; functions below
the routes take the part they use, not this. ``running(setup, ...)`` is the composition: the
workers' transport, the state store (embedded, or shared with the other gateways of the fleet),
the scheduler and its driver, admission with the fleet's quotas, the fair-share sync, and the
routing and replicas pollers of the control plane. Placement sees the workers through control's
replica states when it has them (``replicas.gate_views``); models that may scale to zero hold
their requests at zero (``capacity.CapacityPlan``).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace

from starlette.requests import HTTPConnection

from gateway.admission import AdmissionAdapter
from gateway.capacity import CapacityPlan, CapacitySignals
from gateway.catalog import ModelCatalog
from gateway.dispatcher import Dispatcher
from gateway.fair_share import FairShareSync
from gateway.fleet_quotas import FleetQuotas
from gateway.loop_lag import watch_loop_lag
from gateway.metrics import GatewayMetrics
from gateway.periodic import start_periodic, stop
from gateway.replicas import ReplicasPoller, gate_views
from gateway.request_status import RequestStatusStore
from gateway.routing import RoutingPoller, RoutingTable
from gateway.state_store.factory import open_state_store
from gateway.state_store.protocol import StateStore
from gateway.tokenization import LlmTokenizer, Offload, TextTokenizer
from gateway.transport.protocol import Transport
from scheduling.capacity import CapacityProfile
from scheduling.scheduler import build_scheduler
from settings.capacity_wire import ReplicasDocument
from settings.gateway import GatewaySettings
from settings.scheduling import SchedulingSettings
from settings.stack import StackConfig
from settings.tenants import TenantDirectory
from settings.workers import WorkerAddress

TransportFactory = Callable[[StackConfig, Sequence[WorkerAddress], float], Transport]
"""Makes the workers' transport: the stack, every replica slot's address, the readiness poll interval."""


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
    capacity: CapacityPlan
    replicas: ReplicasPoller | None = None  # control's replica states (None: no control URL given)


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
    capacity: CapacityPlan
    addresses: tuple[WorkerAddress, ...]  # every replica slot of every pool


_background: set[asyncio.Future[None]] = set()


def _routes_changed(gateway: Gateway) -> None:
    """New routes may name versions the readiness poll has not seen yet: re-read the workers now."""
    gateway.metrics.routing_generation.set(gateway.routing.generation)
    _refresh_workers_now(gateway.transport)


def _refresh_workers_now(transport: Transport) -> None:
    """Re-read every worker's readiness in the background (its ``on_refresh`` gives the core the
    new views): after new routes, or a replica control now lists ready, which Triton's readiness
    as last polled may not show yet."""
    task = asyncio.ensure_future(transport.refresh())
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
                  routing_url: str | None, admin_token: Callable[[], str],
                  replicas_url: str | None = None) -> AsyncIterator[Gateway]:
    """Build and start every part; stop them in reverse order on exit."""
    settings, metrics = setup.settings, setup.metrics
    async with AsyncExitStack() as parts:
        gateway_id = new_gateway_id()
        store = open_state_store(settings.state_store, settings.store_timeout_s, settings.stream_journal_timeout_s)
        await store.start()
        parts.push_async_callback(store.close)
        workers = transport(setup.config, setup.addresses, poll_interval_s)
        replicas = (ReplicasPoller(replicas_url, admin_token(), settings.replicas_poll_interval_s,
                                   stale_after_s=settings.replicas_stale_after_s)
                    if replicas_url is not None else None)
        shared = store if settings.shared else None
        scheduler_config = setup.scheduling.scheduler
        if shared is not None:  # counters shared: a tenant between requests keeps its fleet-wide counter
            scheduler_config = replace(scheduler_config, lift_grace_s=settings.fair_share_lift_grace_s)
        scheduler = build_scheduler(scheduler_config, setup.scheduling.limits)
        statuses = RequestStatusStore(gateway=gateway_id, shared=shared, ttl_s=settings.status_ttl_s,
                                      flush_interval_s=settings.status_flush_interval_s)
        def document() -> ReplicasDocument | None:
            return replicas.document if replicas is not None else None

        dispatcher = Dispatcher(scheduler, workers, metrics, statuses,
                                lambda: gate_views(workers.views(setup.profiles), document()),
                                cold_starts=lambda now: setup.capacity.cold_starts(document(), now),
                                signals=CapacitySignals(metrics, setup.capacity))
        quotas = (FleetQuotas(store, metrics, settings.quota_lease_s, flush_interval_s=settings.status_flush_interval_s)
                  if shared is not None else None)
        if quotas is not None:
            dispatcher.on_ended.append(quotas.release)
            parts.push_async_callback(quotas.close)
        routing = RoutingTable.from_config(setup.config)
        offload = Offload(settings.tokenizer_threads)
        parts.callback(offload.close)
        gateway = Gateway(
            models=ModelCatalog(setup.config, workers, setup.llm_tokenizers, setup.text_tokenizers, offload),
            tenants=setup.tenants, transport=workers, dispatcher=dispatcher,
            admission=AdmissionAdapter(dispatcher, setup.scheduling.slo, routing, quotas,
                                       max_attempts=settings.worker_attempts), routing=routing,
            scheduling=setup.scheduling, metrics=metrics, store=store, settings=settings, gateway_id=gateway_id,
            capacity=setup.capacity, replicas=replicas)
        if replicas is not None:  # before the first views: a starting replica never takes work
            await replicas.start()
            parts.push_async_callback(replicas.close)
            replicas.on_change.append(dispatcher.refresh_workers)  # a draining replica: no new work, now
            replicas.on_change.append(lambda: _refresh_workers_now(workers))
        await workers.start()
        parts.push_async_callback(workers.close)
        workers.on_refresh.append(dispatcher.refresh_workers)
        await dispatcher.start()
        parts.push_async_callback(dispatcher.close)
        watch = asyncio.create_task(watch_loop_lag(metrics.event_loop_lag_s), name="loop-lag")
        parts.push_async_callback(stop, watch)
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
