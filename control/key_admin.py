"""The keys control trusts, managed through the admin API (``/admin/v1/keys``), audited.

``GET /admin/v1/keys`` lists the trusted keys (name, key id, whether it is control's own build
key); ``PUT /admin/v1/keys/{name}`` trusts an ed25519 public key (PEM body field ``public_key_pem``)
as ``<trusted_keys_dir>/<name>.pub``; ``DELETE /admin/v1/keys/{name}`` stops trusting it. Verification
reads the trusted-key directory again whenever it changes (``integrity.TrustedKeyDirectory``), so
both take effect at the next registration, without a restart. Every change is an audit entry
(``key.trust``, ``key.untrust``, subject ``key:<name>``, details with the key id) under the acting
operator. Control's own build key cannot be untrusted (409 ``key_in_use``): the workers' start-up
artifacts are signed with it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from control.admin_api import ControlApiError
from control.control_plane import ControlPlane
from control.integrity import PUBLIC_KEY_SUFFIXES, key_id
from control.operator_auth import Actor

KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_PEM_CHARS = 4096

router = APIRouter(prefix="/admin/v1/keys")
KeyName = Annotated[str, Path(pattern=KEY_NAME.pattern)]


class TrustBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    public_key_pem: Annotated[str, Field(max_length=MAX_PEM_CHARS)]
    reason: Annotated[str, Field(max_length=500)] = ""


def _plane(request: Request) -> ControlPlane:
    plane: ControlPlane = request.app.state.control_plane
    return plane


def _public_key(pem: str) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem.encode())
    except (ValueError, TypeError) as exc:
        raise ControlApiError(422, "bad_key", f"not a PEM public key: {exc}") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ControlApiError(422, "bad_key", "the key is not an ed25519 public key")
    return key


def _own_key_id(plane: ControlPlane) -> str | None:
    public = plane.settings.local_signing_key.with_suffix(".pub")
    try:
        return key_id(_public_key(public.read_text()))
    except (OSError, ControlApiError):
        return None


@router.get("")
def trusted_keys(request: Request) -> list[dict[str, Any]]:
    plane = _plane(request)
    directory, own = plane.settings.trusted_keys_dir, _own_key_id(plane)
    rows = []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if path.is_file() and path.suffix in PUBLIC_KEY_SUFFIXES:
            try:
                kid: str | None = key_id(_public_key(path.read_text()))
            except (OSError, ControlApiError):
                kid = None
            rows.append({"name": path.stem, "key_id": kid, "file": str(path), "control_build_key": kid == own})
    return rows


@router.put("/{name}")
def trust(name: KeyName, body: TrustBody, request: Request, actor: Actor) -> dict[str, Any]:
    """Trust ``name``; the same key again is a no-op, another key under that name is 409 ``key_exists``."""
    plane = _plane(request)
    key = _public_key(body.public_key_pem)
    kid = key_id(key)
    target = plane.settings.trusted_keys_dir / f"{name}.pub"
    if target.exists():
        if key_id(_public_key(target.read_text())) != kid:
            raise ControlApiError(409, "key_exists", f"another key is trusted as {name!r}; untrust it first")
        return {"name": name, "key_id": kid, "changed": False}
    target.parent.mkdir(parents=True, exist_ok=True)
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    staging = target.with_suffix(".tmp")
    staging.write_bytes(pem)
    staging.rename(target)
    plane.registry.audit(actor, "key.trust", f"key:{name}", body.reason, {"key_id": kid})
    return {"name": name, "key_id": kid, "changed": True}


@router.delete("/{name}")
def untrust(name: KeyName, request: Request, actor: Actor, reason: str = "") -> dict[str, Any]:
    plane = _plane(request)
    matches = [plane.settings.trusted_keys_dir / f"{name}{suffix}" for suffix in PUBLIC_KEY_SUFFIXES]
    present = [path for path in matches if path.is_file()]
    if not present:
        raise ControlApiError(404, "unknown_key", f"no trusted key named {name!r}")
    kids = {key_id(_public_key(path.read_text())) for path in present}
    if _own_key_id(plane) in kids:
        raise ControlApiError(409, "key_in_use", f"{name!r} is control's own build key; the start-up artifacts "
                                                 "are signed with it")
    for path in present:
        path.unlink()
    plane.registry.audit(actor, "key.untrust", f"key:{name}", reason[:500], {"key_id": sorted(kids)})
    return {"name": name, "key_id": sorted(kids), "changed": True}
