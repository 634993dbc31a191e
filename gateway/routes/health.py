"""Liveness, readiness (every served model has a ready worker, but a model that may scale to zero;
the state store shown) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.composition import gateway_of
from gateway.openapi import errors, not_ready
from gateway.responses import JSONResponse

router = APIRouter()


def _readiness(request: Request) -> tuple[bool, dict[str, bool]]:
    """Whether every served model has a ready worker (a model that may scale to zero need not: its
    requests are held until it has one), and each model's readiness."""
    gateway = gateway_of(request)
    ready = gateway.transport.ready_models()
    models = {m.name: m.name in ready for m in gateway.models.served_models()}
    required = [ok for name, ok in models.items() if name not in gateway.capacity.scale_to_zero]
    return bool(models) and all(required), models


@router.get("/healthz")
async def healthz() -> Any:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", responses={503: {"description": "Not ready: a served model has no ready worker"}})
async def readyz(request: Request) -> Any:
    """Ready while every served model has a ready worker (but a model that may scale to zero); the
    state store's health is shown, not required (without it the gateway serves from its own view)."""
    ok, models = _readiness(request)
    gateway = gateway_of(request)
    store = {"name": gateway.store.name, "healthy": gateway.store.healthy, "shared": gateway.settings.shared}
    return JSONResponse({"ready": ok, "models": models, "gateway": gateway.gateway_id, "state_store": store},
                        status_code=200 if ok else 503)


@router.get("/v2/health/ready", responses=not_ready())
async def v2_ready(request: Request) -> Any:
    """KServe v2 server readiness: 200 when ready, else 400 (what tritonclient checks), with a body."""
    ready = _readiness(request)[0]
    return JSONResponse({"ready": ready}, status_code=200 if ready else 400)


@router.get("/v2/health/live")
async def v2_live() -> Any:
    return JSONResponse({"live": True})


@router.get("/v2")
async def v2_server_metadata() -> Any:
    return JSONResponse({"name": "shunter", "version": "0.1.0", "extensions": ["binary_tensor_data"]})


@router.get("/metrics", responses=errors(401, 404))
async def metrics(request: Request) -> Response:
    gateway = gateway_of(request)
    metrics = gateway.metrics
    metrics.state_store_up.labels(gateway.store.name).set(gateway.store.healthy)
    if gateway.dispatcher.signals is not None:  # the capacity controller's gauges, exact at each scrape
        gateway.dispatcher.signals.publish(gateway.dispatcher.scheduler)
    for worker in gateway.transport.workers():
        for model in worker.models:
            metrics.worker_ready.labels(worker.name, model).set(model in worker.ready_models)
        metrics.worker_streams.labels(worker.name, "opened").set(worker.streams_opened)
        metrics.worker_streams.labels(worker.name, "idle").set(worker.streams_idle)
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
