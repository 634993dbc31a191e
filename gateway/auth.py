"""API-key authentication: ``Authorization: Bearer <key>`` -> the tenant that owns the key."""

from __future__ import annotations

from fastapi import Request

from gateway.composition import gateway_of
from gateway.context import idempotency_key, request_context
from gateway.errors import AuthenticationError, InvalidRequestError
from scheduling.tenants import Tenant


async def authenticate(request: Request) -> Tenant:
    """FastAPI dependency (async: a sync one would hop to a thread pool on every request); raise
    AuthenticationError (401) on a missing or unknown key."""
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise AuthenticationError("missing API key: send 'Authorization: Bearer <key>'")
    gateway = gateway_of(request)
    tenant = gateway.tenants.authenticate(key.strip())
    if tenant is None:
        raise AuthenticationError("invalid API key")
    context = request_context(request)
    context.tenant, context.tier = tenant.name, tenant.tier.value
    idempotency = idempotency_key(request.scope)
    if idempotency == "":
        raise InvalidRequestError("Idempotency-Key must be 1-255 visible ASCII characters", param="Idempotency-Key")
    context.idempotency_key = idempotency  # its semantics: gateway/idempotency.py
    return tenant
