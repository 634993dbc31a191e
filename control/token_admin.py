"""Operator tokens through the admin API (admin role only), audited.

``GET /admin/v1/tokens`` lists the tokens (name, role, when and by whom created; never a token
or its hash). ``POST /admin/v1/tokens`` with ``{"name", "role", "reason"}`` makes a token and
answers it once, in ``token`` (201); control keeps only its SHA-256. ``DELETE
/admin/v1/tokens/{name}`` revokes it at once. Creation and revocation are audit entries
(``token.create`` / ``token.revoke``, subject ``token:<name>``) under the acting operator. The
name ``admin`` is the bootstrap token's and cannot be taken (409 ``token_exists``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from control.admin_api import ControlApiError
from control.control_plane import ControlPlane
from control.operator_auth import BOOTSTRAP_OPERATOR, Actor, new_token, token_sha256
from control.registry import RegistryConflictError, RegistryNotFoundError
from control.registry.operator_tokens import TOKEN_NAME, Role

router = APIRouter(prefix="/admin/v1/tokens")
TokenName = Annotated[str, Path(pattern=TOKEN_NAME.pattern)]


class CreateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(pattern=TOKEN_NAME.pattern)]
    role: Role
    reason: Annotated[str, Field(max_length=500)] = ""


def _plane(request: Request) -> ControlPlane:
    plane: ControlPlane = request.app.state.control_plane
    return plane


@router.get("")
def tokens(request: Request) -> list[dict[str, Any]]:
    return [{**asdict(token), "role": token.role.value} for token in _plane(request).registry.operator_tokens()]


@router.post("", status_code=201)
def create(body: CreateBody, request: Request, actor: Actor) -> dict[str, Any]:
    """A new token for ``name`` with ``role``; the answer is the only place the token appears."""
    if body.name == BOOTSTRAP_OPERATOR:
        raise ControlApiError(409, "token_exists", f"{BOOTSTRAP_OPERATOR!r} is the bootstrap admin token's name")
    token = new_token()
    try:
        stored = _plane(request).registry.create_operator_token(body.name, body.role, token_sha256(token), actor,
                                                                body.reason)
    except RegistryConflictError as exc:
        raise ControlApiError(409, "token_exists", str(exc)) from exc
    return {**asdict(stored), "role": stored.role.value, "token": token}


@router.delete("/{name}")
def revoke(name: TokenName, request: Request, actor: Actor, reason: str = "") -> dict[str, Any]:
    try:
        revoked = _plane(request).registry.revoke_operator_token(name, actor, reason[:500])
    except RegistryNotFoundError as exc:
        raise ControlApiError(404, "unknown_token", str(exc)) from exc
    return {**asdict(revoked), "role": revoked.role.value, "revoked": True}
