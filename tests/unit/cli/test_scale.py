"""``shunter scale``: usage errors exit 2 before any call; against the real control app (a
capacity controller whose replicas never start, served by uvicorn on 127.0.0.1) status, set and
override do what they say and control's refusals exit 1 with their code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cli.ops import TOKEN_ENV
from cli.scale import parse_duration
from control.capacity.controller import CapacityController
from control.operator_auth import new_token, token_sha256
from control.registry.operator_tokens import Role
from control.service import create_control_app
from settings.paths import StackPaths, admin_token
from settings.stack import load_stack_config
from tests.unit.cli.served import ServedApp
from tests.unit.control.capacity.support import Clock, open_controller

runner = CliRunner()


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("1h30m", 5400), ("90s", 90), ("2d", 172800)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "0m", "m", "1x", "-5m", "1.5h"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize("args", [
    ["set", "embed", "--pool", "local-cpu", "--min", "3", "--max", "1"],
    ["set", "embed", "--pool", "local-cpu", "--min", "-1", "--max", "1"],
    ["set", "embed", "--min", "1", "--max", "2"],
    ["override", "embed", "--pool", "local-cpu", "--replicas", "2", "--for", "soon", "--reason", "x"],
    ["override", "embed", "--pool", "local-cpu", "--replicas", "2", "--for", "30m", "--reason", " "],
    ["override", "embed", "--pool", "local-cpu", "--replicas", "two", "--for", "30m", "--reason", "x"],
])
def test_bad_arguments_exit_2_without_calling_control(args: list[str]) -> None:
    result = runner.invoke(app, ["scale", *args, "--control-url", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output


def _served_app(controller: CapacityController, token: str) -> ServedApp:
    stack_paths = StackPaths()
    stack = load_stack_config(stack_paths.pools_file, stack_paths.models_file)
    return ServedApp(create_control_app(stack, controller.replicas._supervisor, token, None, None,
                                        controller.replicas, controller))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServedApp, CapacityController, Path]]:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    token = admin_token(StackPaths(state_dir=state_dir))
    with open_controller(tmp_path, Clock()) as controller:
        controller.run_once()
        server = _served_app(controller, token)
        try:
            yield server, controller, state_dir
        finally:
            server.close()


def _scale(served: tuple[ServedApp, CapacityController, Path], *args: str, token: str | None = None) -> tuple[int, str]:
    server, _, state_dir = served
    result = runner.invoke(app, ["scale", *args, "--control-url", server.url, "--state-dir", str(state_dir)],
                           env={TOKEN_ENV: token} if token else None)
    return result.exit_code, result.output


def test_status_table_and_json(served: tuple[ServedApp, CapacityController, Path]) -> None:
    code, output = _scale(served, "status")
    assert code == 0, output
    assert "local-cpu" in output and "embed" in output and "hold" in output
    code, output = _scale(served, "status", "--json")
    assert code == 0
    rows = {row["model"]: row for row in json.loads(output)["rows"]}
    assert rows["embed"]["ready"] == 1 and rows["vision"]["scale_to_zero"] is True


def test_set_and_override_are_applied_and_audited(served: tuple[ServedApp, CapacityController, Path]) -> None:
    _, controller, _ = served
    dana = new_token()
    controller.registry.create_operator_token("dana", Role.OPERATOR, token_sha256(dana), "admin")
    code, output = _scale(served, "set", "embed", "--pool", "local-cpu", "--min", "1", "--max", "1",
                          "--reason", "budget", token=dana)
    assert code == 0, output
    code, output = _scale(served, "override", "embed", "--pool", "local-cpu", "--replicas", "1", "--for", "30m",
                          "--reason", "incident 7", token=dana)
    assert code == 0, output
    assert "until" in output
    entries = controller.registry.audit_log(subject="embed")
    assert {(e.action, e.actor, e.reason) for e in entries} >= {("capacity.set", "dana", "budget"),
                                                                ("capacity.override", "dana", "incident 7")}


def test_a_viewer_sees_the_status_but_may_not_scale(served: tuple[ServedApp, CapacityController, Path]) -> None:
    _, controller, _ = served
    vic = new_token()
    controller.registry.create_operator_token("vic", Role.VIEWER, token_sha256(vic), "admin")
    assert _scale(served, "status", token=vic)[0] == 0
    code, output = _scale(served, "set", "embed", "--pool", "local-cpu", "--min", "1", "--max", "1", token=vic)
    assert code == 1 and "forbidden, HTTP 403" in output and "needs the operator role" in output


def test_refusals_exit_1_with_their_code(served: tuple[ServedApp, CapacityController, Path]) -> None:
    code, output = _scale(served, "override", "embed", "--pool", "local-cpu", "--replicas", "9", "--for", "1h",
                          "--reason", "x")
    assert code == 1 and "beyond_slots" in output
    code, output = _scale(served, "set", "chat", "--pool", "local-cpu", "--min", "1", "--max", "1")
    assert code == 1 and "not_controlled" in output
