"""``shunter scale``: usage errors exit 2 before any call; against the real control app (a
capacity controller whose replicas never start, served by uvicorn on 127.0.0.1) status, set and
override do what they say and control's refusals exit 1 with their code."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from cli.main import app
from cli.scale import parse_duration
from control.capacity.controller import CapacityController
from control.service import create_control_app
from settings.paths import StackPaths, admin_token
from settings.stack import load_stack_config
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


class Served:
    def __init__(self, controller: CapacityController, token: str) -> None:
        stack_paths = StackPaths()
        stack = load_stack_config(stack_paths.pools_file, stack_paths.models_file)
        app_ = create_control_app(stack, controller.replicas._supervisor, token, None, None,
                                  controller.replicas, controller)
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app_, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, CapacityController, Path]]:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    token = admin_token(StackPaths(state_dir=state_dir))
    with open_controller(tmp_path, Clock()) as controller:
        controller.run_once()
        server = Served(controller, token)
        try:
            yield server, controller, state_dir
        finally:
            server.close()


def _scale(served: tuple[Served, CapacityController, Path], *args: str) -> tuple[int, str]:
    server, _, state_dir = served
    result = runner.invoke(app, ["scale", *args, "--control-url", server.url, "--state-dir", str(state_dir)])
    return result.exit_code, result.output


def test_status_table_and_json(served: tuple[Served, CapacityController, Path]) -> None:
    code, output = _scale(served, "status")
    assert code == 0, output
    assert "local-cpu" in output and "embed" in output and "hold" in output
    code, output = _scale(served, "status", "--json")
    assert code == 0
    rows = {row["model"]: row for row in json.loads(output)["rows"]}
    assert rows["embed"]["ready"] == 1 and rows["vision"]["scale_to_zero"] is True


def test_set_and_override_are_applied_and_audited(served: tuple[Served, CapacityController, Path]) -> None:
    _, controller, _ = served
    code, output = _scale(served, "set", "embed", "--pool", "local-cpu", "--min", "1", "--max", "1",
                          "--reason", "budget", "--actor", "dana")
    assert code == 0, output
    code, output = _scale(served, "override", "embed", "--pool", "local-cpu", "--replicas", "1", "--for", "30m",
                          "--reason", "incident 7", "--actor", "dana")
    assert code == 0, output
    assert "until" in output
    entries = controller.registry.audit_log(subject="embed")
    assert {(e.action, e.actor, e.reason) for e in entries} >= {("capacity.set", "dana", "budget"),
                                                                ("capacity.override", "dana", "incident 7")}


def test_refusals_exit_1_with_their_code(served: tuple[Served, CapacityController, Path]) -> None:
    code, output = _scale(served, "override", "embed", "--pool", "local-cpu", "--replicas", "9", "--for", "1h",
                          "--reason", "x")
    assert code == 1 and "beyond_slots" in output
    code, output = _scale(served, "set", "chat", "--pool", "local-cpu", "--min", "1", "--max", "1")
    assert code == 1 and "not_controlled" in output
