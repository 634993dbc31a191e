"""The capacity controller's admin routes (admin bearer token, like every ``/admin`` route).

* ``GET /admin/capacity/replicas``: the replicas document the gateways poll
  (``settings.capacity_wire``);
* ``GET /admin/v1/capacity``: per pool x model bounds, desired/ready/starting/draining replicas,
  signals, the last decision and the cap holding it back, the live override (``shunter scale
  status``);
* ``PUT /admin/v1/capacity/{model}/{pool}``: new ``min_replicas`` / ``max_replicas``
  (``shunter scale set``);
* ``POST /admin/v1/capacity/{model}/{pool}/override``: an expiring count above the caps
  (``shunter scale override``).

Refusals are ``CapacityError`` (``controller.py``), mapped to HTTP by
``control.admin_api.error_status`` like every control error. Without a controller (no
``capacity.yaml`` pairs, or ``replicas.enabled: false``) the replicas document is still served
and the other routes answer 404 ``capacity_disabled``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, ConfigDict, Field

from control.capacity.controller import CapacityController, CapacityError
from control.capacity.source import ReplicaSource
from settings.capacity_wire import REPLICAS_PATH

router = APIRouter()
Actor = Annotated[str, Header(alias="X-Shunter-Actor", max_length=200)]


class BoundsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min_replicas: Annotated[int, Field(ge=0, le=1024)]
    max_replicas: Annotated[int, Field(ge=0, le=1024)]
    reason: Annotated[str, Field(max_length=2000)] = ""


class OverrideBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    replicas: Annotated[int, Field(ge=0, le=1024)]
    for_s: Annotated[float, Field(gt=0)]
    reason: Annotated[str, Field(min_length=1, max_length=2000)]


def _replicas(request: Request) -> ReplicaSource:
    replicas: ReplicaSource | None = getattr(request.app.state, "replicas", None)
    if replicas is None:
        raise CapacityError(404, "capacity_disabled", "this control service manages no replicas")
    return replicas


def _controller(request: Request) -> CapacityController:
    controller: CapacityController | None = getattr(request.app.state, "capacity", None)
    if controller is None:
        raise CapacityError(404, "capacity_disabled", "no capacity controller runs (capacity.yaml controls "
                                                      "no model, or control.yaml replicas.enabled is false)")
    return controller


@router.get(REPLICAS_PATH)
def replicas_document(request: Request) -> dict[str, Any]:
    return _replicas(request).document().model_dump(mode="json")


@router.get("/admin/v1/capacity")
def capacity_status(request: Request) -> dict[str, Any]:
    return _controller(request).status()


@router.put("/admin/v1/capacity/{model}/{pool}")
def set_bounds(model: str, pool: str, body: BoundsBody, request: Request, actor: Actor) -> dict[str, Any]:
    controller = _controller(request)
    controller.set_bounds(model, pool, body.min_replicas, body.max_replicas, actor, body.reason)
    return controller.status()


@router.post("/admin/v1/capacity/{model}/{pool}/override")
def override(model: str, pool: str, body: OverrideBody, request: Request, actor: Actor) -> dict[str, Any]:
    controller = _controller(request)
    controller.override(model, pool, body.replicas, body.for_s, actor, body.reason)
    return controller.status()
