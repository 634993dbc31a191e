"""The gateway's parts, built once at startup (``app.create_app``), typed, reached by handlers
through ``gateway_of(request)``. Functions below the routes take the part they use, not this."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from gateway.admission import AdmissionAdapter
from gateway.catalog import ModelCatalog
from gateway.dispatcher import Dispatcher
from gateway.idempotency import IdempotencyLedger
from gateway.metrics import GatewayMetrics
from gateway.routing import RoutingTable
from gateway.transport.protocol import Transport
from settings.scheduling import SchedulingSettings
from settings.tenants import TenantDirectory


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
    idempotency: IdempotencyLedger


def gateway_of(connection: HTTPConnection) -> Gateway:
    gateway: Gateway = connection.app.state.gateway
    return gateway
