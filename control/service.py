"""The control service: the admin API's app, with workers and readiness here and the registry,
routing, rollout and audit routes from ``admin_api.py``.

Every ``/admin`` route is authenticated and authorised by ``control/operator_auth.py``: the
bootstrap admin token or a personal operator token with a role, separate from tenant API keys.
The CLI and the gateways' routing pollers call it; it never serves inference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from control.access_log import ControlAccessLogMiddleware
from control.admin_api import ControlApiError, error_response
from control.admin_api import router as admin_router
from control.capacity.api import router as capacity_router
from control.capacity.controller import CapacityController
from control.capacity.source import ReplicaSource
from control.control_plane import ControlPlane
from control.errors import ControlError
from control.key_admin import router as key_router
from control.observability import RolloutCollector, prometheus_targets
from control.operator_auth import authorizer
from control.supervisor import Supervisor
from control.token_admin import router as token_router
from settings.access_log import AccessLog
from settings.stack import StackConfig
from settings.workers import WorkerAddress


def create_control_app(config: StackConfig, supervisor: Supervisor | None, admin_token: str,
                       plane: ControlPlane | None = None,
                       gateways: Callable[[], list[dict[str, Any]]] | None = None,
                       replicas: ReplicaSource | None = None, capacity: CapacityController | None = None,
                       access_log: AccessLog | None = None) -> FastAPI:
    """The admin app; ``gateways`` lists the gateway processes the local stack runs; ``replicas``
    and ``capacity`` serve the capacity routes (``control/capacity/api.py``) and ``/metrics``;
    ``access_log`` gets one line per request (``control/access_log.py``).
    Without a ``supervisor`` (Kubernetes mode) the workers listed are the pods the plane's deployer finds."""
    app = FastAPI(title="Shunter control", docs_url=None, redoc_url=None)
    if access_log is not None:
        app.add_middleware(ControlAccessLogMiddleware, access_log=access_log)

    registry = plane.registry if plane is not None else capacity.registry if capacity is not None else None
    authorize = authorizer(admin_token, registry.operator_token if registry is not None else None)

    async def control_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ControlError)
        return error_response(exc)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error_response(ControlApiError(422, "invalid_request", f"{where}: {first.get('msg', 'invalid')}"))

    app.add_exception_handler(ControlError, control_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    if plane is not None:
        app.state.control_plane = plane
        app.include_router(admin_router, dependencies=[Depends(authorize)])
        app.include_router(key_router, dependencies=[Depends(authorize)])
        app.include_router(token_router, dependencies=[Depends(authorize)])
    app.state.replicas, app.state.capacity = replicas, capacity
    app.include_router(capacity_router, dependencies=[Depends(authorize)])

    rollouts = CollectorRegistry()
    if plane is not None:
        rollouts.register(RolloutCollector([m.name for m in config.models], plane.registry.active_rollout))

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        """The capacity controller's series (with a controller) and the rollouts', for Prometheus / KEDA."""
        text = generate_latest(rollouts)
        if capacity is not None:
            capacity.refresh_metrics()
            text += generate_latest(capacity.metrics.registry)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    @app.get("/admin/v1/prometheus/targets", dependencies=[Depends(authorize)])
    def targets() -> list[dict[str, object]]:
        """The Triton workers' metrics endpoints, in Prometheus' HTTP service discovery format."""
        if supervisor is None:
            return prometheus_targets(plane.deployer.discover() if plane and plane.deployer.discover else [])
        return prometheus_targets([worker.address for worker in list(supervisor.workers)])

    @app.get("/admin/v1/workers", dependencies=[Depends(authorize)])
    def workers() -> list[dict[str, Any]]:
        if supervisor is None:
            return _remote_rows(plane.deployer.discover() if plane and plane.deployer.discover else [])
        rows = []
        with httpx.Client(timeout=2.0) as client:
            for worker in list(supervisor.workers):
                address = worker.address
                rows.append({
                    "name": address.name, "pool": address.pool, "gpu_type": address.gpu_type,
                    "region": address.region, "grpc": f"{address.host}:{address.grpc_port}",
                    "pid": worker.process.pid if worker.process else None,
                    "alive": worker.alive(), "restarts": worker.restarts,
                    "models": worker.models_ready(client) if worker.alive() else {},
                })
        return rows

    @app.get("/admin/v1/gateways", dependencies=[Depends(authorize)])
    def gateway_processes() -> list[dict[str, Any]]:
        return gateways() if gateways is not None else []

    @app.get("/admin/v1/models", dependencies=[Depends(authorize)])
    def models() -> list[dict[str, Any]]:
        return [
            {"name": m.name, "kind": m.kind.value, "version": m.version,
             "max_batch_size": m.batching.max_batch_size, "instances": m.instances}
            for m in config.models
        ]

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _remote_rows(addresses: Sequence[WorkerAddress]) -> list[dict[str, Any]]:
    """The rows of ``/admin/v1/workers`` for pods control did not start, read from each pod's API."""
    rows = []
    with httpx.Client(timeout=2.0) as client:
        for address in addresses:
            base = f"http://{address.host}:{address.http_port}"
            models: dict[str, bool] = {}
            for model in address.models:
                try:
                    models[model] = client.get(f"{base}/v2/models/{model}/ready").status_code == 200
                except httpx.HTTPError:
                    models[model] = False
            try:
                alive = client.get(f"{base}/v2/health/live").status_code == 200
            except httpx.HTTPError:
                alive = False
            rows.append({"name": address.name, "pool": address.pool, "gpu_type": address.gpu_type,
                         "region": address.region, "grpc": f"{address.host}:{address.grpc_port}",
                         "pid": None, "alive": alive, "restarts": 0, "models": models})
    return rows
