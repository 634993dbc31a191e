"""The control service: the admin API's app, with workers and readiness here and the registry,
routing, rollout and audit routes from ``admin_api.py``.

Every ``/admin`` route is authenticated with the admin bearer token, separate from tenant API
keys. The CLI and the gateways' routing pollers call it; it never serves inference.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from control.admin_api import ControlApiError, error_response
from control.admin_api import router as admin_router
from control.capacity.api import router as capacity_router
from control.capacity.controller import CapacityController
from control.capacity.source import ReplicaSource
from control.control_plane import ControlPlane
from control.errors import ControlError
from control.key_admin import router as key_router
from control.supervisor import Supervisor
from settings.stack import StackConfig
from settings.workers import WorkerAddress


def create_control_app(config: StackConfig, supervisor: Supervisor | None, admin_token: str,
                       plane: ControlPlane | None = None,
                       gateways: Callable[[], list[dict[str, Any]]] | None = None,
                       replicas: ReplicaSource | None = None, capacity: CapacityController | None = None) -> FastAPI:
    """The admin app; ``gateways`` lists the gateway processes the local stack runs; ``replicas``
    and ``capacity`` serve the capacity routes (``control/capacity/api.py``) and ``/metrics``.
    Without a ``supervisor`` (Kubernetes mode) the workers listed are the pods the plane's deployer finds."""
    app = FastAPI(title="Shunter control", docs_url=None, redoc_url=None)

    def require_admin(authorization: Annotated[str, Header()] = "") -> None:
        expected = f"Bearer {admin_token}"
        if not hmac.compare_digest(authorization.encode(), expected.encode()):
            raise ControlApiError(401, "invalid_admin_token", "admin token required")

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
        app.include_router(admin_router, dependencies=[Depends(require_admin)])
        app.include_router(key_router, dependencies=[Depends(require_admin)])
    app.state.replicas, app.state.capacity = replicas, capacity
    app.include_router(capacity_router, dependencies=[Depends(require_admin)])

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        """The capacity controller's series (none without a controller), for Prometheus / KEDA."""
        if capacity is None:
            return Response(b"", media_type=CONTENT_TYPE_LATEST)
        capacity.refresh_metrics()
        return Response(generate_latest(capacity.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/admin/v1/workers", dependencies=[Depends(require_admin)])
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

    @app.get("/admin/v1/gateways", dependencies=[Depends(require_admin)])
    def gateway_processes() -> list[dict[str, Any]]:
        return gateways() if gateways is not None else []

    @app.get("/admin/v1/models", dependencies=[Depends(require_admin)])
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
