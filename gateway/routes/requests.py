"""``GET /v1/requests/{id}``: a request's status, queue position and estimated start while queued,
its outcome after; only the tenant that sent it can see it (to anyone else it does not exist)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from gateway.auth import authenticate
from gateway.errors import NotFoundError
from gateway.responses import JSONResponse
from gateway.state import GatewayState
from scheduling.tenants import Tenant

router = APIRouter(prefix="/v1")


@router.get("/requests/{request_id}")
async def request_status(request_id: str, request: Request,
                         tenant: Annotated[Tenant, Depends(authenticate)]) -> Any:
    state: GatewayState = request.app.state.gateway
    record = state.dispatcher.statuses.get(request_id, tenant.name)
    if record is None:
        raise NotFoundError(f"no request '{request_id}' for your tenant", param="request_id")
    body = record.public()
    if record.status == "queued":
        now = state.dispatcher.clock()
        place = state.dispatcher.scheduler.status(request_id, now)
        if place is not None:
            body["queue_position"] = place.position
            body["estimated_start_in_s"] = round(place.estimated_start_s - now, 3)
    return JSONResponse(body)
