"""The control plane's admin API: registry, routing, rollouts and the audit log over HTTP.

Authenticated with the admin bearer token (``service.py``); the acting user is the
``X-Shunter-Actor`` header (recorded in the audit log). Errors leave as
``{"error": {"message", "type", "code"}}`` with the status mapped in ``error_status``, one place:
validation 422, unknown 404, conflicts 409, an artifact that fails its integrity check 422 with the
integrity code (``digest_mismatch``, ``untrusted_key``, …), a gateway that did not confirm 504,
any other ``ControlError`` 500.
The rollout endpoints block until the action is done (loads, warmup, drains), bounded by
``control.yaml``'s timeouts. ``GET /admin/v1/routing`` is what gateways poll.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from control.artifacts import ArtifactStoreError
from control.capacity.controller import CapacityError
from control.control_plane import ControlPlane
from control.deployer import DeployError
from control.errors import ControlError
from control.gateway_probe import GatewayProbeError
from control.integrity import IntegrityError
from control.registry import (
    AliasRecord,
    RegistryConflictError,
    RegistryNotFoundError,
    RegistryValidationError,
    RuntimeRequirements,
    VersionRecord,
)
from control.rollouts import RolloutError

router = APIRouter(prefix="/admin/v1")
Actor = Annotated[str, Header(alias="X-Shunter-Actor", max_length=200)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str, Field(max_length=2000)] = ""


class RequirementsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    backend: str = "python"
    kind: str
    gpu_types: list[str] = []
    min_gpu_memory_gb: Annotated[float, Field(ge=0)] = 0.0
    quantization: str | None = None
    max_context_tokens: Annotated[int, Field(ge=1)] | None = None


class RegisterBody(_Body):
    version: Annotated[int, Field(ge=1)]
    artifact_uri: Annotated[str, Field(min_length=1, max_length=2000)]
    requirements: RequirementsBody


class CanaryBody(_Body):
    to: Annotated[int, Field(ge=1)]
    percent: Annotated[float, Field(gt=0, lt=100)]
    sticky: Literal["request", "tenant"] = "request"


class AbBody(_Body):
    variants: dict[int, Annotated[float, Field(ge=0, le=100)]]
    sticky: Literal["request", "tenant"] = "tenant"


class ControlApiError(ControlError):
    """The admin API refuses a request; ``status`` and ``code`` go into the error response."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(exc: ControlError) -> JSONResponse:
    """The error body of ``exc``, with the status ``error_status`` maps it to."""
    status, code = error_status(exc)
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": str(exc), "type": kind, "code": code}}, status_code=status)


def error_status(exc: ControlError) -> tuple[int, str]:
    """The one mapping of the control plane's errors (``control/errors.py``) to (HTTP status, code)."""
    match exc:
        case ControlApiError() | RolloutError() | CapacityError():
            return exc.status, exc.code
        case IntegrityError() | DeployError():
            return 422, exc.code
        case RegistryNotFoundError():
            return 404, "not_found"
        case RegistryConflictError():
            return 409, "conflict"
        case RegistryValidationError():
            return 422, "invalid"
        case ArtifactStoreError():
            return 502, "artifact_store"
        case GatewayProbeError():
            return 504, "gateway_not_confirmed"
    return 500, "internal_error"


def _plane(request: Request) -> ControlPlane:
    plane: ControlPlane = request.app.state.control_plane
    return plane


def version_json(record: VersionRecord) -> dict[str, Any]:
    return {**asdict(record), "requirements": asdict(record.requirements), "state": record.state.value}


def alias_json(alias: AliasRecord | None) -> dict[str, Any] | None:
    if alias is None:
        return None
    return {"model": alias.model, "weights": {str(v): w for v, w in alias.weights.items()},
            "sticky": alias.sticky, "generation": alias.generation}


@router.get("/routing")
def routing(request: Request) -> dict[str, Any]:
    registry = _plane(request).registry
    return {"generation": registry.routing_generation(),
            "aliases": [alias_json(a) for a in registry.aliases()]}


@router.get("/models")
def models(request: Request) -> list[dict[str, Any]]:
    plane = _plane(request)
    rows = []
    for name in plane.registry.models():
        spec = plane.config.model(name)
        rows.append({"name": name, "kind": spec.kind.value if spec else None,
                     "versions": [version_json(v) for v in plane.registry.versions(name)],
                     "alias": alias_json(plane.registry.alias(name))})
    return rows


@router.post("/models/{model}/versions", status_code=201)
def register_version(model: str, body: RegisterBody, request: Request, actor: Actor) -> dict[str, Any]:
    """Download the artifact and verify its signed manifest into its verified copy (which staging
    reuses), then register the version."""
    plane = _plane(request)
    if plane.config.model(model) is None:
        raise ControlApiError(404, "model_not_configured", f"model {model} is not served by this stack")
    if plane.registry.version(model, body.version) is not None:
        raise ControlApiError(409, "version_exists", f"{model} version {body.version} is already registered")
    verified = plane.deployer.copies.fetch(body.artifact_uri, model, body.version)
    record = plane.registry.register_version(
        model, body.version, body.artifact_uri, verified.digest, verified.signer_key_id,
        RuntimeRequirements(**body.requirements.model_dump()), actor, body.reason)
    return version_json(record)


@router.get("/models/{model}/versions")
def versions(model: str, request: Request) -> list[dict[str, Any]]:
    return [version_json(v) for v in _plane(request).registry.versions(model)]


def status_json(plane: ControlPlane, model: str) -> dict[str, Any]:
    registry = plane.registry
    alias = registry.alias(model)
    rollout = registry.active_rollout(model) or next(iter(registry.rollouts(model, limit=1)), None)
    live = sorted(alias.weights) if alias else []
    windows = plane.canary.windows(model, live)
    verdict = plane.canary.verdicts.get(model)
    return {
        "model": model, "alias": alias_json(alias),
        "rollout": None if rollout is None else {**asdict(rollout), "status": rollout.status.value,
                                                 "variants": {str(v): w for v, w in rollout.variants.items()}},
        "versions": {str(v): {"requests": w.requests, "errors": w.errors, "error_rate": w.error_rate,
                              "p99_latency_s": w.p99_latency_s} for v, w in windows.items()},
        "last_verdict": None if verdict is None else verdict.as_dict(),
    }


@router.get("/rollouts/{model}")
def rollout_status(model: str, request: Request) -> dict[str, Any]:
    return status_json(_plane(request), model)


@router.post("/rollouts/{model}/canary")
def start_canary(model: str, body: CanaryBody, request: Request, actor: Actor) -> dict[str, Any]:
    plane = _plane(request)
    timings = plane.rollouts.start_canary(model, body.to, body.percent, body.sticky, actor, body.reason)
    return {**status_json(plane, model), "timings": timings}


@router.post("/rollouts/{model}/ab")
def start_ab(model: str, body: AbBody, request: Request, actor: Actor) -> dict[str, Any]:
    plane = _plane(request)
    timings = plane.rollouts.start_ab(model, body.variants, body.sticky, actor, body.reason)
    return {**status_json(plane, model), "timings": timings}


@router.post("/rollouts/{model}/{action}")
def rollout_action(model: str, action: Literal["promote", "pause", "resume", "rollback"], body: _Body,
                   request: Request, actor: Actor) -> dict[str, Any]:
    plane = _plane(request)
    act = {"promote": plane.rollouts.promote, "pause": plane.rollouts.pause,
           "resume": plane.rollouts.resume, "rollback": plane.rollouts.rollback}[action]
    timings = act(model, actor, body.reason)
    return {**status_json(plane, model), "timings": timings}


@router.get("/audit")
def audit(request: Request, subject: str | None = None,
          limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
    return [asdict(e) for e in _plane(request).registry.audit_log(subject=subject, limit=limit)]
