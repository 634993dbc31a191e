"""``shunter tokens`` against the real control app (SQLite registry, uvicorn on 127.0.0.1): the
bootstrap admin makes a personal token, which then acts under its own name and role."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cli.ops import TOKEN_ENV
from control.control_plane import ControlPlane
from control.service import create_control_app
from settings.paths import StackPaths, admin_token
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings, WorkloadKind
from tests.unit.cli.served import ServedApp

CONFIG = StackConfig(
    triton=TritonSettings(),
    pools=(PoolSpec(name="local-cpu", models=("tabular",)),),
    models=(ModelSpec(name="tabular", kind=WorkloadKind.TABULAR),),
)


@pytest.fixture
def control(tmp_path: Path) -> Iterator[tuple[str, Path, ControlPlane]]:
    paths = StackPaths(config_dir=tmp_path / "config", state_dir=tmp_path / "state", repository=tmp_path / "repo")
    plane = ControlPlane.open(paths, CONFIG)
    served = ServedApp(create_control_app(CONFIG, None, admin_token(paths), plane))
    try:
        yield served.url, paths.state_dir, plane
    finally:
        served.close()
        plane.close()


def _shunter(control: tuple[str, Path, ControlPlane], *args: str, token: str | None = None) -> tuple[int, str]:
    url, state_dir, _ = control
    result = CliRunner().invoke(app, [*args, "--control-url", url, "--state-dir", str(state_dir)],
                                env={TOKEN_ENV: token or ""})
    return result.exit_code, result.output


def test_create_list_use_and_revoke_a_token(control: tuple[str, Path, ControlPlane]) -> None:
    _, _, plane = control
    code, output = _shunter(control, "tokens", "create", "ana", "--role", "viewer", "--json", "--reason", "new hire")
    assert code == 0, output
    token = json.loads(output)["token"]
    code, output = _shunter(control, "tokens", "list")
    assert code == 0 and "ana" in output and "viewer" in output and token not in output

    code, output = _shunter(control, "audit", "--json", token=token)  # a viewer reads
    assert code == 0, output
    assert [(e["actor"], e["action"]) for e in json.loads(output)][:1] == [("admin", "token.create")]
    code, output = _shunter(control, "tokens", "list", token=token)  # but does not manage tokens
    assert code == 1 and "forbidden, HTTP 403" in output and "needs the admin role" in output

    code, output = _shunter(control, "tokens", "revoke", "ana", "--reason", "left")
    assert code == 0 and "revoked the viewer token of ana" in output
    code, output = _shunter(control, "audit", token=token)
    assert code == 1 and "unauthenticated, HTTP 401" in output
    assert plane.registry.audit_log(subject="token:ana")[0].reason == "left"


def test_create_prints_the_token_once_with_how_to_use_it(control: tuple[str, Path, ControlPlane]) -> None:
    code, output = _shunter(control, "tokens", "create", "bo", "--role", "operator")
    assert code == 0, output
    assert "shown once" in output and f"export {TOKEN_ENV}=" in output
    assert any(line.startswith("shunter_") for line in output.splitlines())


def test_a_bad_role_is_a_usage_error(control: tuple[str, Path, ControlPlane]) -> None:
    code, output = _shunter(control, "tokens", "create", "bo", "--role", "root")
    assert code == 2 and "root" in output
