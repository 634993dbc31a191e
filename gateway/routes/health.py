"""Liveness, readiness (every served model has a ready worker) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.responses import JSONResponse
from gateway.state import GatewayState

router = APIRouter()


def _readiness(request: Request) -> tuple[bool, dict[str, bool]]:
    state: GatewayState = request.app.state.gateway
    ready = state.pool.ready_models()
    models = {m.name: m.name in ready for m in state.served_models()}
    return bool(models) and all(models.values()), models


@router.get("/healthz")
async def healthz() -> Any:
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> Any:
    ok, models = _readiness(request)
    return JSONResponse({"ready": ok, "models": models}, status_code=200 if ok else 503)


@router.get("/v2/health/ready")
async def v2_ready(request: Request) -> Response:
    return Response(status_code=200 if _readiness(request)[0] else 400)


@router.get("/v2/health/live")
async def v2_live() -> Response:
    return Response(status_code=200)


@router.get("/v2")
async def v2_server_metadata() -> Any:
    return JSONResponse({"name": "shunter", "version": "0.1.0", "extensions": ["binary_tensor_data"]})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state: GatewayState = request.app.state.gateway
    for worker in state.pool.workers:
        for model in worker.address.models:
            state.metrics.worker_ready.labels(worker.address.name, model).set(model in worker.ready_models)
        state.metrics.worker_streams.labels(worker.address.name, "opened").set(worker.streams.opened)
        state.metrics.worker_streams.labels(worker.address.name, "idle").set(worker.streams.idle)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
