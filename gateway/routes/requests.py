"""``GET /v1/requests/{id}``: a request's status, queue position and estimated start while queued,
its outcome after, from whichever gateway of the fleet holds it; ``waiting_for_capacity`` while it is
held for its model's cold start (``scheduling.holding``); only the tenant that sent it can
see it (to anyone else it does not exist).
``GET /v1/requests?status=queued`` lists the tenant's own newest requests (at most ``limit``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from gateway.auth import authenticate
from gateway.composition import gateway_of
from gateway.dispatcher import Dispatcher
from gateway.errors import NotFoundError
from gateway.openapi import READ, errors
from gateway.request_status import QUEUED, WAITING_FOR_CAPACITY
from gateway.responses import JSONResponse
from gateway.state_store.protocol import RequestRecord
from scheduling.tenants import Tenant

router = APIRouter(prefix="/v1")


@router.get("/requests/{request_id}", responses=errors(*READ, 404, 422))
async def request_status(request_id: str, request: Request,
                         tenant: Annotated[Tenant, Depends(authenticate)]) -> Any:
    dispatcher = gateway_of(request).dispatcher
    record = await dispatcher.statuses.lookup(request_id, tenant.name)
    if record is None:
        raise NotFoundError(f"no request '{request_id}' for your tenant", param="request_id")
    return JSONResponse(_describe(dispatcher, record))


@router.get("/requests", responses=errors(*READ, 422))
async def list_requests(request: Request, tenant: Annotated[Tenant, Depends(authenticate)],
                        status: Annotated[str | None, Query(max_length=32)] = None,
                        limit: Annotated[int, Query(ge=1, le=100)] = 20) -> Any:
    dispatcher = gateway_of(request).dispatcher
    records = await dispatcher.statuses.fleet_recent(tenant.name, status, limit)
    return JSONResponse({"object": "list", "data": [_describe(dispatcher, r) for r in records]})


def _describe(dispatcher: Dispatcher, record: RequestRecord) -> dict[str, Any]:
    body = record.public()
    if record.status in (QUEUED, WAITING_FOR_CAPACITY):
        now = dispatcher.clock()
        place = dispatcher.scheduler.status(record.request_id, now)
        if place is not None:
            body["status"] = WAITING_FOR_CAPACITY if place.held else QUEUED
            body["queue_position"] = place.position
            estimate = place.estimated_start_s - now
            body["estimated_start_in_s"] = round(estimate, 3) if estimate != float("inf") else None
    return body
