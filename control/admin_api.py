"""The control plane's admin API: registry, routing, rollouts and the audit log over HTTP.

Authenticated and authorised per route by ``control/operator_auth.py`` (bearer tokens with
roles); the audit log's actor is the authenticated token's name. Errors leave as
``{"error": {"message", "type", "code"}}`` with the status mapped in ``error_status``, one place:
401 unauthenticated, 403 forbidden (with ``required_role``), validation 422, unknown 404,
conflicts 409, an artifact that fails its integrity check 422 with the integrity code
(``digest_mismatch``, ``untrusted_key``, …), a gateway that did not confirm 504, any other
``ControlError`` 500.
The rollout endpoints block until the action is done (loads, warmup, drains), bounded by
``control.yaml``'s timeouts. ``GET /admin/v1/routing`` is what gateways poll.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from control.artifact_layout import ArtifactLayoutError, check_layout
from control.artifacts import ArtifactStoreError
from control.capacity.controller import CapacityError
from control.control_plane import ControlPlane
from control.deployer import DeployError
from control.errors import ControlError
from control.gateway_probe import GatewayProbeError
from control.housekeeping import HousekeepingError, delete_unserved, prune
from control.integrity import IntegrityError
from control.operator_auth import AccessError, Actor
from control.registry import (
    AliasRecord,
    RegistryConflictError,
    RegistryNotFoundError,
    RegistryValidationError,
    RuntimeRequirements,
    VersionRecord,
    VersionState,
)
from control.rollouts import RolloutError
from scheduling.traffic_split import StickyTo, TrafficSplit
from settings.stack import ConfigError
from settings.tenants import load_tenants

router = APIRouter(prefix="/admin/v1")


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
    sticky: Literal["request", "tenant", "user"] = "request"


class AbBody(_Body):
    variants: dict[int, Annotated[float, Field(ge=0, le=100)]]
    sticky: Literal["request", "tenant", "user"] = "tenant"


class ControlApiError(ControlError):
    """The admin API refuses a request; ``status`` and ``code`` go into the error response."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(exc: ControlError) -> JSONResponse:
    """The error body of ``exc``, with the status ``error_status`` maps it to."""
    status, code = error_status(exc)
    kind = "invalid_request_error" if status < 500 else "server_error"
    error: dict[str, Any] = {"message": str(exc), "type": kind, "code": code}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, AccessError) and exc.required_role is not None:
        error["required_role"] = exc.required_role.value
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def error_status(exc: ControlError) -> tuple[int, str]:
    """The one mapping of the control plane's errors (``control/errors.py``) to (HTTP status, code)."""
    match exc:
        case ControlApiError() | RolloutError() | HousekeepingError() | CapacityError() | AccessError():
            return exc.status, exc.code
        case IntegrityError() | DeployError() | ArtifactLayoutError():
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


def known_model(plane: ControlPlane, model: str) -> str:
    """``model`` if this stack configures it or the registry knows it; else 404 ``unknown_model``
    naming the known ones, so that a typo is an error, never an empty answer."""
    known = sorted({spec.name for spec in plane.config.models} | set(plane.registry.models()))
    if model not in known:
        raise ControlApiError(404, "unknown_model", f"no model named {model!r}; known models: {', '.join(known)}")
    return model


def version_json(record: VersionRecord, state_reason: str | None = None) -> dict[str, Any]:
    return {**asdict(record), "requirements": asdict(record.requirements), "state": record.state.value,
            "state_reason": state_reason}


def state_reasons(plane: ControlPlane, model: str) -> dict[int, str]:
    """Why each version of ``model`` is in its state: the reason of its newest ``version.state``
    audit entry, or that it was pruned after it."""
    reasons: dict[int, str] = {}
    for entry in plane.registry.audit_log(subject=model, action_prefix="version.", limit=1000):
        version = (entry.details or {}).get("version")
        if not isinstance(version, int) or version in reasons:
            continue
        if entry.action == "version.state":
            reasons[version] = entry.reason
        elif entry.action == "version.pruned":
            reasons[version] = "pruned (artifact deleted)" + (f": {entry.reason}" if entry.reason else "")
    return reasons


def versions_json(plane: ControlPlane, model: str) -> list[dict[str, Any]]:
    reasons = state_reasons(plane, model)
    return [version_json(v, reasons.get(v.version)) for v in plane.registry.versions(model)]


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
                     "versions": versions_json(plane, name),
                     "alias": alias_json(plane.registry.alias(name))})
    return rows


@router.post("/models/{model}/versions", status_code=201)
def register_version(model: str, body: RegisterBody, request: Request, actor: Actor) -> dict[str, Any]:
    """Download the artifact and verify its signed manifest into its verified copy (which staging
    reuses), check its files against the kind's layout (``control/artifact_layout.py``), then
    register the version. A refusal is audited (``version.refused`` with its code)."""
    plane = _plane(request)
    spec = plane.config.model(known_model(plane, model))
    if spec is None:
        raise ControlApiError(404, "model_not_configured", f"model {model} is not served by this stack")
    if plane.registry.version(model, body.version) is not None:
        raise ControlApiError(409, "version_exists", f"{model} version {body.version} is already registered")
    try:
        verified = plane.deployer.copies.fetch(body.artifact_uri, model, body.version)
        check_layout(spec, verified.manifest.files)
    except (IntegrityError, ArtifactLayoutError) as exc:
        plane.registry.audit(actor, "version.refused", model, body.reason,
                             {"version": body.version, "code": exc.code, "message": str(exc)})
        raise
    plane.registry.register_version(
        model, body.version, body.artifact_uri, verified.digest, verified.signer_key_id,
        RuntimeRequirements(**body.requirements.model_dump()), actor, body.reason)
    reason = f"manifest {verified.digest[:12]}… and signature by key {verified.signer_key_id} checked at registration"
    record = plane.registry.set_version_state(model, body.version, VersionState.VERIFIED, actor, reason)
    return version_json(record, reason)


@router.delete("/models/{model}/versions/{version}")
def delete_version(model: str, version: int, request: Request, actor: Actor, reason: str = "") -> dict[str, Any]:
    """Delete a version that never served (record, stored artifact, verified copy)."""
    plane = _plane(request)
    return delete_unserved(plane, known_model(plane, model), version, actor, reason[:500]).as_dict()


class PruneBody(_Body):
    dry_run: bool = False


@router.post("/prune")
def prune_versions(body: PruneBody, request: Request, actor: Actor) -> dict[str, Any]:
    """Free the space of retired and failed versions; ``dry_run`` only says what would go."""
    freed = prune(_plane(request), actor, body.reason, body.dry_run)
    return {"dry_run": body.dry_run, "freed": [f.as_dict() for f in freed],
            "verified_bytes": sum(f.verified_bytes for f in freed)}


@router.get("/models/{model}/versions")
def versions(model: str, request: Request) -> list[dict[str, Any]]:
    plane = _plane(request)
    return versions_json(plane, known_model(plane, model))


def tenant_versions(plane: ControlPlane, alias: AliasRecord | None) -> dict[str, int] | None:
    """Under a split sticky to tenants, the version each configured tenant lands on (the gateways'
    own ``TrafficSplit``, so it is exactly where their requests go); None for other splits. With
    few tenants the share of tenants can be far from the weights: this shows it."""
    if alias is None or alias.sticky != StickyTo.TENANT.value or len([w for w in alias.weights.values() if w]) < 2:
        return None
    split = TrafficSplit(alias.model, alias.weights, StickyTo.TENANT)
    try:
        tenants = load_tenants(plane.paths.tenants_file).tenants
    except ConfigError:
        return None
    return {tenant.name: split.choose("", tenant.name) for tenant in tenants}


def status_json(plane: ControlPlane, model: str) -> dict[str, Any]:
    registry = plane.registry
    alias = registry.alias(model)
    rollout = registry.active_rollout(model) or next(iter(registry.rollouts(model, limit=1)), None)
    live = sorted(alias.weights) if alias else []
    windows = plane.canary.windows(model, live)
    judged = plane.canary.verdicts.get(model)
    verdict = judged[1] if judged is not None and rollout is not None and judged[0] == rollout.id else None
    return {
        "model": model, "alias": alias_json(alias), "tenant_versions": tenant_versions(plane, alias),
        "rollout": None if rollout is None else {**asdict(rollout), "status": rollout.status.value,
                                                 "variants": {str(v): w for v, w in rollout.variants.items()}},
        "versions": {str(v): {"requests": w.requests, "errors": w.errors, "error_rate": w.error_rate,
                              "p99_latency_s": w.p99_latency_s} for v, w in windows.items()},
        "last_verdict": None if verdict is None else verdict.as_dict(),
    }


@router.get("/rollouts/{model}")
def rollout_status(model: str, request: Request) -> dict[str, Any]:
    plane = _plane(request)
    return status_json(plane, known_model(plane, model))


@router.post("/rollouts/{model}/canary")
def start_canary(model: str, body: CanaryBody, request: Request, actor: Actor) -> dict[str, Any]:
    plane = _plane(request)
    timings = plane.rollouts.start_canary(known_model(plane, model), body.to, body.percent, body.sticky, actor,
                                          body.reason)
    return {**status_json(plane, model), "timings": timings}


@router.post("/rollouts/{model}/ab")
def start_ab(model: str, body: AbBody, request: Request, actor: Actor) -> dict[str, Any]:
    plane = _plane(request)
    timings = plane.rollouts.start_ab(known_model(plane, model), body.variants, body.sticky, actor, body.reason)
    return {**status_json(plane, model), "timings": timings}


class TargetBody(_Body):
    """An action that may name the version it ends on (``promote --to``, ``undo --to``)."""

    to: Annotated[int | None, Field(ge=1)] = None


@router.post("/rollouts/{model}/promote")
def promote(model: str, body: TargetBody, request: Request, actor: Actor) -> dict[str, Any]:
    """Finish the rollout: ``to`` (default the largest candidate) takes all traffic."""
    plane = _plane(request)
    timings = plane.rollouts.promote(known_model(plane, model), actor, body.reason, body.to)
    return {**status_json(plane, model), "timings": timings}


@router.post("/rollouts/{model}/undo")
def undo(model: str, body: TargetBody, request: Request, actor: Actor) -> dict[str, Any]:
    """Bring back the version live before the last promote (or ``to``); see ``RolloutManager.undo``."""
    plane = _plane(request)
    timings = plane.rollouts.undo(known_model(plane, model), actor, body.reason, body.to)
    return {**status_json(plane, model), "timings": timings}


@router.post("/rollouts/{model}/{action}")
def rollout_action(model: str, action: Literal["pause", "resume", "rollback"], body: _Body,
                   request: Request, actor: Actor) -> dict[str, Any]:
    plane = _plane(request)
    act = {"pause": plane.rollouts.pause, "resume": plane.rollouts.resume, "rollback": plane.rollouts.rollback}[action]
    timings = act(known_model(plane, model), actor, body.reason)
    return {**status_json(plane, model), "timings": timings}


@router.get("/audit")
def audit(request: Request, subject: str | None = None,
          limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
    plane = _plane(request)
    if subject is not None:
        known_model(plane, subject)
    return [asdict(e) for e in plane.registry.audit_log(subject=subject, limit=limit)]
