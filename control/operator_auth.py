"""Who calls the admin API, and what they may do: per-operator bearer tokens with roles.

Every ``/admin`` route needs ``Authorization: Bearer <token>``. The token is either

* the bootstrap admin token (``<state>/admin.token``, or the admin Secret in Kubernetes mode),
  which acts as the operator ``admin`` with the ``admin`` role — the gateways poll with it, and
  it creates the first personal tokens; or
* a personal token made by ``shunter tokens create NAME --role R`` (``control/token_admin.py``),
  of which control stores only the SHA-256 (``control.registry.operator_tokens``).

What a route needs is one rule, ``required_role``: reads (GET) need ``viewer``; changes need
``operator`` (push, rollouts, undo, prune, delete, scale); trusted keys' changes and everything
about tokens need ``admin``. The audit log's actor is the authenticated token's name, never a name
the caller declares. Refusals are ``AccessError``, mapped with every other control error in
``control.admin_api.error_status``: 401 ``unauthenticated`` (no token, or one control does not
know; with ``WWW-Authenticate: Bearer``) and 403 ``forbidden`` (the body's ``required_role`` says
which role the route needs).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request

from control.errors import ControlError
from control.registry.operator_tokens import OperatorToken, Role

BOOTSTRAP_OPERATOR = "admin"
TOKEN_PREFIX = "shunter_"
ADMIN_ONLY_PREFIXES = ("/admin/v1/tokens",)
ADMIN_WRITE_PREFIXES = ("/admin/v1/keys",)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

TokenLookup = Callable[[str], OperatorToken | None]


class AccessError(ControlError):
    """The caller is not authenticated (401) or its role is too low for the route (403)."""

    def __init__(self, status: int, code: str, message: str, required_role: Role | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.required_role = status, code, required_role


@dataclass(frozen=True, slots=True)
class Operator:
    """The authenticated caller: its token's name (the audit actor) and role."""

    name: str
    role: Role


def new_token() -> str:
    """A fresh personal token: 256 random bits, prefixed so that it is recognisable in a leak scan."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_sha256(token: str) -> str:
    """The at-rest form of a token (hex SHA-256)."""
    return hashlib.sha256(token.encode()).hexdigest()


def required_role(method: str, path: str) -> Role:
    """The role a request needs: tokens are admin-only; keys need admin to change; other reads
    need viewer, other changes operator."""
    if path.startswith(ADMIN_ONLY_PREFIXES):
        return Role.ADMIN
    if method.upper() in READ_METHODS:
        return Role.VIEWER
    return Role.ADMIN if path.startswith(ADMIN_WRITE_PREFIXES) else Role.OPERATOR


def authenticate(authorization: str, bootstrap_token: str, lookup: TokenLookup | None) -> Operator:
    """The operator behind an ``Authorization`` header, else ``AccessError`` 401."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AccessError(401, "unauthenticated", "send 'Authorization: Bearer <token>' (the admin token or "
                                                  "a token from `shunter tokens create`)")
    if bootstrap_token and hmac.compare_digest(token.encode(), bootstrap_token.encode()):
        return Operator(BOOTSTRAP_OPERATOR, Role.ADMIN)
    stored = lookup(token_sha256(token)) if lookup is not None else None
    if stored is None:
        raise AccessError(401, "unauthenticated", "unknown or revoked admin token")
    return Operator(stored.name, stored.role)


def authorizer(bootstrap_token: str, lookup: TokenLookup | None) -> Callable[..., Operator]:
    """A FastAPI dependency that authenticates the caller, checks ``required_role`` for the
    request, and leaves the ``Operator`` on ``request.state.operator``."""

    def authorize(request: Request, authorization: Annotated[str, Header()] = "") -> Operator:
        operator = authenticate(authorization, bootstrap_token, lookup)
        needed = required_role(request.method, request.url.path)
        if not operator.role.allows(needed):
            raise AccessError(403, "forbidden", f"{request.method} {request.url.path} needs the {needed.value} "
                                                f"role; token {operator.name!r} has {operator.role.value}", needed)
        request.state.operator = operator
        return operator

    return authorize


def acting_operator(request: Request) -> str:
    """The authenticated operator's name, for the audit log (set by the ``authorizer``)."""
    operator: Operator | None = getattr(request.state, "operator", None)
    if operator is None:
        raise AccessError(401, "unauthenticated", "this route was reached without authentication")
    return operator.name


Actor = Annotated[str, Depends(acting_operator)]
