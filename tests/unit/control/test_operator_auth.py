"""Per-operator admin tokens on the real control app (SQLite registry, TestClient): the bootstrap
token acts as ``admin``; personal tokens are stored hashed, carry a role, are audited under the
authenticated name, and refusals are 401 ``unauthenticated`` / 403 ``forbidden`` in the error body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control.control_plane import ControlPlane
from control.operator_auth import required_role, token_sha256
from control.registry.operator_tokens import Role
from control.service import create_control_app
from settings.paths import StackPaths
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings, WorkloadKind

BOOTSTRAP = "bootstrap-secret"
CONFIG = StackConfig(
    triton=TritonSettings(),
    pools=(PoolSpec(name="local-cpu", models=("tabular",)),),
    models=(ModelSpec(name="tabular", kind=WorkloadKind.TABULAR),),
)


@pytest.fixture
def control(tmp_path: Path) -> Iterator[tuple[TestClient, ControlPlane]]:
    paths = StackPaths(config_dir=tmp_path / "config", state_dir=tmp_path / "state", repository=tmp_path / "repo")
    plane = ControlPlane.open(paths, CONFIG)
    try:
        yield TestClient(create_control_app(CONFIG, None, BOOTSTRAP, plane)), plane
    finally:
        plane.close()


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _create(client: TestClient, name: str, role: str) -> str:
    response = client.post("/admin/v1/tokens", json={"name": name, "role": role, "reason": "on call"},
                           headers=_as(BOOTSTRAP))
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


@pytest.mark.parametrize(("method", "path", "role"), [
    ("GET", "/admin/v1/models", Role.VIEWER),
    ("GET", "/admin/v1/audit", Role.VIEWER),
    ("GET", "/admin/v1/keys", Role.VIEWER),
    ("GET", "/admin/capacity/replicas", Role.VIEWER),
    ("POST", "/admin/v1/rollouts/chat/canary", Role.OPERATOR),
    ("POST", "/admin/v1/models/chat/versions", Role.OPERATOR),
    ("DELETE", "/admin/v1/models/chat/versions/3", Role.OPERATOR),
    ("PUT", "/admin/v1/capacity/chat/local-cpu", Role.OPERATOR),
    ("POST", "/admin/v1/prune", Role.OPERATOR),
    ("PUT", "/admin/v1/keys/release", Role.ADMIN),
    ("DELETE", "/admin/v1/keys/release", Role.ADMIN),
    ("GET", "/admin/v1/tokens", Role.ADMIN),
    ("POST", "/admin/v1/tokens", Role.ADMIN),
])
def test_reads_need_viewer_changes_operator_keys_and_tokens_admin(method: str, path: str, role: Role) -> None:
    assert required_role(method, path) is role


def test_roles_include_the_ones_below() -> None:
    assert Role.ADMIN.allows(Role.OPERATOR) and Role.OPERATOR.allows(Role.VIEWER)
    assert not Role.VIEWER.allows(Role.OPERATOR) and not Role.OPERATOR.allows(Role.ADMIN)


def test_a_token_is_shown_once_and_stored_only_as_its_hash(control: tuple[TestClient, ControlPlane],
                                                           tmp_path: Path) -> None:
    client, plane = control
    token = _create(client, "ana", "operator")
    assert token.startswith("shunter_") and len(token) > 40
    listed = client.get("/admin/v1/tokens", headers=_as(BOOTSTRAP)).json()
    assert listed == [{"name": "ana", "role": "operator", "created_at": listed[0]["created_at"],
                       "created_by": "admin"}]
    database = b"".join(path.read_bytes() for path in (tmp_path / "state").rglob("registry*") if path.is_file())
    assert token.encode() not in database and token_sha256(token).encode() in database
    entry = plane.registry.audit_log(subject="token:ana")[0]
    assert (entry.actor, entry.action, entry.details) == ("admin", "token.create", {"role": "operator"})


def test_the_audit_actor_is_the_authenticated_operator_not_a_declared_one(
        control: tuple[TestClient, ControlPlane]) -> None:
    client, plane = control
    token = _create(client, "ana", "admin")
    response = client.post("/admin/v1/tokens", json={"name": "bob", "role": "viewer"},
                           headers={**_as(token), "X-Shunter-Actor": "mallory"})
    assert response.status_code == 201, response.text
    assert plane.registry.audit_log(subject="token:bob")[0].actor == "ana"


def test_a_viewer_reads_but_may_not_change(control: tuple[TestClient, ControlPlane]) -> None:
    client, _ = control
    token = _create(client, "vic", "viewer")
    assert client.get("/admin/v1/models", headers=_as(token)).status_code == 200
    refused = client.post("/admin/v1/prune", json={"dry_run": True}, headers=_as(token))
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert (error["code"], error["required_role"], error["type"]) == ("forbidden", "operator", "invalid_request_error")
    assert "needs the operator role" in error["message"] and "'vic' has viewer" in error["message"]


def test_an_operator_may_not_manage_tokens_or_keys(control: tuple[TestClient, ControlPlane]) -> None:
    client, _ = control
    token = _create(client, "ana", "operator")
    for method, path, body in (("POST", "/admin/v1/tokens", {"name": "eve", "role": "admin"}),
                               ("GET", "/admin/v1/tokens", None),
                               ("PUT", "/admin/v1/keys/mine", {"public_key_pem": "x"}),
                               ("DELETE", "/admin/v1/tokens/ana", None)):
        refused = client.request(method, path, json=body, headers=_as(token))
        assert refused.status_code == 403, (method, path)
        assert refused.json()["error"]["required_role"] == "admin"


def test_refusals_without_a_known_token_are_401_before_the_body_is_read(
        control: tuple[TestClient, ControlPlane]) -> None:
    client, _ = control
    for headers in ({}, {"Authorization": "Basic abc"}, _as("shunter_guessed")):
        refused = client.post("/admin/v1/prune", content=b"{not json", headers=headers)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["code"] == "unauthenticated"


def test_a_revoked_token_stops_working_at_once_and_the_revocation_is_audited(
        control: tuple[TestClient, ControlPlane]) -> None:
    client, plane = control
    token = _create(client, "ana", "admin")
    assert client.get("/admin/v1/tokens", headers=_as(token)).status_code == 200
    revoked = client.delete("/admin/v1/tokens/ana", params={"reason": "left"}, headers=_as(BOOTSTRAP))
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    assert client.get("/admin/v1/models", headers=_as(token)).status_code == 401
    assert [e.action for e in plane.registry.audit_log(subject="token:ana")] == ["token.revoke", "token.create"]
    assert client.delete("/admin/v1/tokens/ana", headers=_as(BOOTSTRAP)).json()["error"]["code"] == "unknown_token"


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"name": "admin", "role": "viewer"}, 409, "token_exists"),
    ({"name": "ana", "role": "root"}, 422, "invalid_request"),
    ({"name": "../ana", "role": "viewer"}, 422, "invalid_request"),
])
def test_bad_token_requests_are_refused_with_their_code(control: tuple[TestClient, ControlPlane],
                                                        body: dict[str, str], status: int, code: str) -> None:
    client, _ = control
    response = client.post("/admin/v1/tokens", json=body, headers=_as(BOOTSTRAP))
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)


def test_a_second_token_under_a_taken_name_is_409(control: tuple[TestClient, ControlPlane]) -> None:
    client, _ = control
    _create(client, "ana", "viewer")
    again = client.post("/admin/v1/tokens", json={"name": "ana", "role": "admin"}, headers=_as(BOOTSTRAP))
    assert (again.status_code, again.json()["error"]["code"]) == (409, "token_exists")
