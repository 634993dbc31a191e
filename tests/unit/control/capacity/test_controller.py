"""The capacity controller's operator surface without Triton: bounds and overrides are checked,
audited with actor and reason, shown in status and on /metrics; overrides expire on the clock.
No replica is started: the supervisor's workers are adopted as they are configured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control.capacity.controller import CapacityController, CapacityError
from control.service import create_control_app
from settings.paths import StackPaths
from settings.stack import StackConfig, load_stack_config
from tests.unit.control.capacity.support import TOKEN, Clock, open_controller


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def controller(tmp_path: Path, clock: Clock) -> Iterator[CapacityController]:
    with open_controller(tmp_path, clock) as opened:
        yield opened


def _stack() -> StackConfig:
    shipped = StackPaths()
    return load_stack_config(shipped.pools_file, shipped.models_file)


def test_status_lists_every_controlled_pool_and_model(controller: CapacityController) -> None:
    controller.run_once()
    rows = {row["model"]: row for row in controller.status()["rows"]}
    assert set(rows) == {"embed", "vision"}
    embed = rows["embed"]
    assert (embed["ready"], embed["starting"], embed["draining"]) == (1, 0, 0)
    assert embed["last_decision"]["action"] == "hold"
    assert embed["signals"]["held_requests"] == 0
    assert not embed["capped_by_budget"]


def test_set_bounds_is_checked_and_audited(controller: CapacityController) -> None:
    with pytest.raises(CapacityError) as unknown:
        controller.set_bounds("chat", "local-cpu", 1, 1, "ops", "")
    assert unknown.value.status == 404
    with pytest.raises(CapacityError, match="min"):
        controller.set_bounds("embed", "local-cpu", 2, 1, "ops", "")
    with pytest.raises(CapacityError, match="slots"):
        controller.set_bounds("embed", "local-cpu", 1, 5, "ops", "")
    with pytest.raises(CapacityError, match="scales to zero"):
        controller.set_bounds("vision", "local-cpu", 1, 1, "ops", "")
    controller.set_bounds("embed", "local-cpu", 1, 1, "alice", "hold embed at one")
    assert controller.config.targets[controller.key("embed", "local-cpu")].max_replicas == 1
    entry = controller.registry.audit_log(subject="embed", action_prefix="capacity.set")[0]
    assert (entry.actor, entry.reason) == ("alice", "hold embed at one")
    assert entry.details["new"] == {"min_replicas": 1, "max_replicas": 1}


def test_override_is_audited_shown_and_expires(controller: CapacityController, clock: Clock) -> None:
    with pytest.raises(CapacityError, match="reason"):
        controller.override("embed", "local-cpu", 1, 60, "bob", " ")
    with pytest.raises(CapacityError, match="slots"):
        controller.override("embed", "local-cpu", 3, 60, "bob", "incident 42")
    controller.override("embed", "local-cpu", 1, 60, "bob", "incident 42")
    controller.run_once()
    row = next(r for r in controller.status()["rows"] if r["model"] == "embed")
    assert row["override"] == {"replicas": 1, "expires_at_s": clock.now + 60, "reason": "incident 42", "actor": "bob"}
    clock.now += 61
    controller.run_once()
    row = next(r for r in controller.status()["rows"] if r["model"] == "embed")
    assert row["override"] is None
    actions = [(e.action, e.actor) for e in controller.registry.audit_log(subject="embed")]
    assert ("capacity.override", "bob") in actions
    assert ("capacity.override_expired", "capacity-controller") in actions


def test_admin_routes_map_refusals_and_serve_the_replicas_document(controller: CapacityController) -> None:
    app = create_control_app(_stack(), controller.replicas._supervisor, TOKEN, None, None,
                             controller.replicas, controller)
    client = TestClient(app)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/admin/capacity/replicas").status_code == 401
    document = client.get("/admin/capacity/replicas", headers=auth).json()
    assert {(r["name"], r["state"]) for r in document["replicas"]} == {("local-cpu-0", "ready"),
                                                                      ("local-cpu-1", "stopped")}
    assert document["cold_start_s"]["embed"] > 0
    bad = client.put("/admin/v1/capacity/embed/local-cpu", headers=auth,
                     json={"min_replicas": 3, "max_replicas": 1})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_bounds"
    missing = client.post("/admin/v1/capacity/nope/local-cpu/override", headers=auth,
                          json={"replicas": 1, "for_s": 60, "reason": "x"})
    assert missing.status_code == 404
    controller.run_once()
    metrics = client.get("/metrics").text
    assert 'shunter_capacity_desired_replicas{model="embed",pool="local-cpu"} 1.0' in metrics
    assert "shunter_capacity_decisions_total" in metrics


def test_gateways_whose_metrics_need_a_token_are_read_with_it(controller: CapacityController) -> None:
    """A gateway with ``metrics_token_file`` answers /metrics only with the token: the controller sends it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Gateway(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            allowed = self.headers.get("Authorization") == "Bearer metrics-secret"
            self.send_response(200 if allowed else 401)
            self.end_headers()
            self.wfile.write(b"" if allowed else b"token required")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        controller._gateway_urls = [f"http://127.0.0.1:{server.server_address[1]}"]
        assert controller.run_once() == () and "401" in (controller.gateway_error or "")
        controller._metrics_headers = {"Authorization": "Bearer metrics-secret"}
        assert controller.run_once() and controller.gateway_error is None
    finally:
        server.shutdown()


def test_bounds_and_overrides_outlive_a_control_restart(tmp_path: Path, clock: Clock) -> None:
    with open_controller(tmp_path, clock) as first:
        first.set_bounds("embed", "local-cpu", 1, 1, "alice", "hold embed at one")
        first.override("embed", "local-cpu", 2, 60, "bob", "incident 42")
    with open_controller(tmp_path, clock) as second:  # the same registry database: a restarted control
        key = second.key("embed", "local-cpu")
        assert (second.config.targets[key].min_replicas, second.config.targets[key].max_replicas) == (1, 1)
        row = next(r for r in second.status()["rows"] if r["model"] == "embed")
        assert row["max_replicas"] == 1
        assert row["override"] == {"replicas": 2, "expires_at_s": clock.now + 60, "reason": "incident 42",
                                   "actor": "bob"}
    clock.now += 61
    with open_controller(tmp_path, clock) as third:  # the override expired while control was down
        row = next(r for r in third.status()["rows"] if r["model"] == "embed")
        assert row["override"] is None and row["max_replicas"] == 1
        assert third.registry.capacity_overrides() == []
        actions = [(e.action, e.actor) for e in third.registry.audit_log(subject="embed")
                   if e.action != "capacity.decision"]
        assert actions == [("capacity.override_expired", "capacity-controller"), ("capacity.override", "bob"),
                               ("capacity.set", "alice")]


def test_stored_settings_that_no_longer_fit_capacity_yaml_are_skipped(tmp_path: Path, clock: Clock) -> None:
    with open_controller(tmp_path, clock) as first:
        first.registry.set_capacity_bounds("local-cpu", "chat", 1, 1, "alice", "chat is not controlled")
        first.registry.set_capacity_bounds("local-cpu", "embed", 0, 9, "alice", "more than the slots")
        first.registry.put_capacity_override("local-cpu", "vision", 7, clock.now + 60, "bob", "too many")
    with open_controller(tmp_path, clock) as second:
        key = second.key("embed", "local-cpu")
        assert second.config.targets[key].max_replicas == 2  # capacity.yaml's
        assert not second.state.overrides
