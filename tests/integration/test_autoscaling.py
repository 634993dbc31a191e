"""The capacity controller on the real stack: one pool serving ``embed``, real Triton workers, the
gateway placing by control's replicas document, periods and windows shortened by the test's
``capacity.yaml`` and ``control.yaml``.

* A step load on ``embed`` starts a second worker of the pool; it gets no request before its
  model is loaded and warmed, then takes traffic; no 5xx; when the load stops it drains and stops
  after the stabilisation window (a light load runs on through the drain).
* ``max_replicas: 1`` (set through ``shunter scale set``) under the same load: no scale-up, the
  status shows the cap; ``shunter scale override`` raises it until it expires; the audit log has
  both with actor and reason.
* ``chat`` streams running on a second replica when it is scaled down: every stream ends with its
  finish reason, none is cut.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app as cli_app
from cli.ops import TOKEN_ENV
from control.stack import Listen, LocalStack
from settings.paths import StackPaths, admin_token
from tests.integration.conftest import KEYS, make_paths, metric_sum, stream_chat
from tests.integration.ports import port

pytestmark = pytest.mark.integration

GATEWAY_PORT = port(28200)
CONTROL_PORT = port(28201)
WORKER_BASE_PORT = port(28210)
PERIOD_S = 1.0
SCALE_DOWN_WINDOW_S = 6.0
TEXT = ("Shunter sizes every pool from the token work waiting for it, not from the number of requests, "
        "because one request may be fifty tokens or fifty thousand; this sentence is long enough to count. ")


@dataclass
class Scaling:
    stack: LocalStack
    paths: StackPaths
    token: str

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @cached_property
    def ops_token(self) -> str:
        """A personal operator token named ``ops@test``: the CLI's scale changes are audited under it."""
        created = httpx.post(f"{self.stack.control_url}/admin/v1/tokens", headers=self.admin, timeout=5,
                             json={"name": "ops@test", "role": "operator"})
        created.raise_for_status()
        return str(created.json()["token"])

    def replicas(self) -> dict[str, dict[str, Any]]:
        """The replicas document, by replica name."""
        body = httpx.get(f"{self.stack.control_url}/admin/capacity/replicas", headers=self.admin, timeout=5).json()
        return {r["name"]: r for r in body["replicas"]}

    def state(self, name: str) -> str:
        return str(self.replicas()[name]["state"])

    def status_row(self, model: str = "embed") -> dict[str, Any]:
        body = httpx.get(f"{self.stack.control_url}/admin/v1/capacity", headers=self.admin, timeout=5).json()
        return next(r for r in body["rows"] if r["model"] == model)

    def executions(self, index: int, model: str = "embed") -> int:
        """Requests Triton's ``model`` executed on worker ``index`` (its inference statistics; 0 when down)."""
        http_port = WORKER_BASE_PORT + 3 * index
        try:
            url = f"http://127.0.0.1:{http_port}/v2/models/{model}/stats"
            stats = httpx.get(url, timeout=5).json()["model_stats"]
        except (httpx.HTTPError, KeyError, ValueError):
            return 0
        return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)

    def scale(self, *args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli_app, ["scale", *args, "--control-url", self.stack.control_url,
                                              "--state-dir", str(self.paths.state_dir)],
                                    env={TOKEN_ENV: self.ops_token})
        return result.exit_code, result.output


@dataclass
class Load:
    """Clients sending embeddings in a loop (each pausing ``pause_s`` between requests)."""

    url: str
    clients: int
    pause_s: float = 0.0
    statuses: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        for i in range(self.clients):
            thread = threading.Thread(target=self._run, args=(i,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _run(self, i: int) -> None:
        headers = {"Authorization": f"Bearer {KEYS['premium']}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=60) as client:
            n = 0
            while not self._stop.is_set():
                n += 1
                try:
                    response = client.post("/v1/embeddings", json={"model": "embed", "input": f"{i}.{n} {TEXT}"})
                    self.statuses.append(response.status_code)
                except httpx.HTTPError:
                    self.statuses.append(0)
                if self.pause_s:
                    self._stop.wait(self.pause_s)

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=70)

    def server_errors(self) -> list[int]:
        return [s for s in self.statuses if s >= 500 or s == 0]


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, poll_s: float = 0.2) -> float:
    """Seconds until ``check()`` held; fail naming ``what`` after ``timeout_s``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout_s:
            pytest.fail(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(poll_s)
    return time.monotonic() - started


def _config(root: Path) -> StackPaths:
    paths = make_paths(root, WORKER_BASE_PORT, models=("chat", "embed"))
    (paths.config_dir / "capacity.yaml").write_text(yaml.safe_dump({
        "controller": {"period_s": PERIOD_S, "scale_down_window_s": SCALE_DOWN_WINDOW_S},
        "models": {"embed": {"pools": {"local-cpu": {"min_replicas": 1, "max_replicas": 2}}},
                   "chat": {"pools": {"local-cpu": {"min_replicas": 1, "max_replicas": 1}}}},
    }))
    models = yaml.safe_load(paths.models_file.read_text())
    for model in models["models"]:
        if model["name"] == "chat":  # two engines share the 2 cores while both replicas run
            model["parameters"]["n_threads"] = "1"
    paths.models_file.write_text(yaml.safe_dump(models))
    (paths.config_dir / "control.yaml").write_text(yaml.safe_dump({"replicas": {"drain_grace_s": 2.0}}))
    tenants = yaml.safe_load(paths.tenants_file.read_text())
    for tenant in tenants["tenants"]:
        tenant["quotas"] = {}  # the load is bounded by the clients, not by quotas
    paths.tenants_file.write_text(yaml.safe_dump(tenants))
    return paths


@pytest.fixture(scope="module")
def scaling(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[Scaling]:
    paths = _config(tmp_path_factory.mktemp("autoscaling"))
    stack = LocalStack(paths, Listen(gateway_port=GATEWAY_PORT, control_port=CONTROL_PORT))
    stack.start(log=lambda _: None)
    try:
        yield Scaling(stack, paths, admin_token(paths))
    finally:
        stack.stop()


def test_step_load_adds_a_warmed_replica_that_takes_traffic_then_drains(scaling: Scaling) -> None:
    assert scaling.state("local-cpu-1") == "stopped"
    time.sleep(3 * PERIOD_S)
    assert scaling.state("local-cpu-1") == "stopped", "no load, no scale-up"
    step = time.monotonic()
    with Load(scaling.stack.gateway_url, clients=4) as load:
        started = wait_for("a second replica starts", lambda: scaling.state("local-cpu-1") != "stopped",
                           timeout_s=2 * PERIOD_S + 8)
        # until it is ready, the new worker executes no request but control's warm-up
        while (state := scaling.state("local-cpu-1")) == "starting":
            executed = scaling.executions(1)
            if scaling.state("local-cpu-1") == "starting":
                assert executed <= 1, f"worker 1 executed {executed} requests before it was ready"
            time.sleep(0.1)
        assert state == "ready", state
        ready_after = time.monotonic() - step
        warmed = scaling.executions(1)
        wait_for("the new replica takes traffic", lambda: scaling.executions(1) > warmed + 20, timeout_s=20)
        row = scaling.status_row()
        assert (row["ready"], row["desired"]) == (2, 2)
    assert load.server_errors() == [], f"5xx during the step: {sorted(set(load.server_errors()))}"
    assert load.statuses.count(200) > 50
    metrics = f"{scaling.stack.control_url}/metrics"
    assert metric_sum(metrics, "shunter_capacity_decisions_total", {"model": "embed", "action": "up"}) >= 1
    assert metric_sum(metrics, "shunter_capacity_cold_start_seconds", {"model": "embed"}) > 0
    # the load stops; a light one goes on through the drain, which must cost it nothing
    with Load(scaling.stack.gateway_url, clients=1, pause_s=0.5) as light:
        drained = wait_for("the second replica drains and stops", lambda: scaling.state("local-cpu-1") == "stopped",
                           timeout_s=SCALE_DOWN_WINDOW_S + 30)
        assert drained >= SCALE_DOWN_WINDOW_S - 2 * PERIOD_S, f"drained after {drained:.1f} s: before the window"
        time.sleep(1.0)
    assert light.server_errors() == []
    assert metric_sum(metrics, "shunter_capacity_desired_replicas", {"model": "embed"}) == 1
    actions = [e["details"]["action"] for e in _audit(scaling, "capacity.decision")]
    assert "up" in actions and "down" in actions
    print(f"scale-up decided {started:.1f} s after the step; ready {ready_after:.1f} s after; drained "
          f"{drained:.1f} s after the load stopped")


def test_a_cap_holds_under_load_and_an_override_lifts_it_until_it_expires(scaling: Scaling) -> None:
    assert scaling.state("local-cpu-1") == "stopped"
    code, output = scaling.scale("set", "embed", "--pool", "local-cpu", "--min", "1", "--max", "1",
                                 "--reason", "budget freeze")
    assert code == 0, output
    with Load(scaling.stack.gateway_url, clients=4) as load:
        wait_for("the cap shows", lambda: scaling.status_row()["capped_by_budget"], timeout_s=10 + 2 * PERIOD_S)
        time.sleep(4 * PERIOD_S)
        assert scaling.state("local-cpu-1") == "stopped", "scaled above max_replicas"
        row = scaling.status_row()
        assert row["cap"] == "max_replicas" and row["desired"] == 1
        code, output = scaling.scale("status")
        assert code == 0 and "capped by max_replicas" in " ".join(output.split()), output
        code, output = scaling.scale("override", "embed", "--pool", "local-cpu", "--replicas", "2", "--for", "20s",
                                     "--reason", "incident 17: purchased capacity")
        assert code == 0, output
        wait_for("the override's replica is ready", lambda: scaling.state("local-cpu-1") == "ready", timeout_s=60)
        expires_at = scaling.status_row()["override"]["expires_at_s"]
        wait_for("the override expires and the replica drains",
                 lambda: scaling.state("local-cpu-1") == "stopped", timeout_s=20 + 30)
        assert time.time() >= expires_at - 0.5, "drained before the override expired"
    assert load.server_errors() == []
    entries = {e["action"]: e for e in _audit(scaling, "capacity.")}
    assert (entries["capacity.set"]["actor"], entries["capacity.set"]["reason"]) == ("ops@test", "budget freeze")
    override = entries["capacity.override"]
    assert (override["actor"], override["reason"]) == ("ops@test", "incident 17: purchased capacity")
    assert entries["capacity.override_expired"]["details"]["actor"] == "ops@test"


def test_a_scale_down_cuts_no_stream(scaling: Scaling) -> None:
    assert scaling.state("local-cpu-1") == "stopped"
    code, output = scaling.scale("override", "chat", "--pool", "local-cpu", "--replicas", "2", "--for", "5m",
                                 "--reason", "stream drain test")
    assert code == 0, output
    wait_for("a second chat replica", lambda: scaling.state("local-cpu-1") == "ready", timeout_s=90)
    gateway_metrics = f"{scaling.stack.gateway_url}/metrics"
    wait_for("the gateway sees it", lambda: metric_sum(gateway_metrics, "shunter_worker_model_ready",
                                                       {"worker": "local-cpu-1", "model": "chat"}) == 1, timeout_s=10)
    time.sleep(2.0)  # and has read the replicas document since (every 1 s)

    async def streams() -> tuple[list[tuple[str, str | None]], int]:
        headers = {"Authorization": f"Bearer {KEYS['premium']}"}
        async with httpx.AsyncClient(base_url=scaling.stack.gateway_url, headers=headers, timeout=120) as client:
            # long, distinct prompts: more prompt work than one engine's prefill line takes at once
            prompts = [f"{i} {' '.join(str(i * 1000 + j) for j in range(50))}. Count upwards from {i}."
                       for i in range(6)]
            tasks = [asyncio.create_task(stream_chat(client, prompt, 100)) for prompt in prompts]
            await asyncio.sleep(3.0)  # the streams run on both replicas: now the override gives way to the cap
            on_replica_1 = await asyncio.to_thread(
                metric_sum, f"{scaling.stack.gateway_url}/metrics", "shunter_worker_generation_streams",
                {"worker": "local-cpu-1", "state": "opened"})
            ended = await asyncio.to_thread(
                httpx.post, f"{scaling.stack.control_url}/admin/v1/capacity/chat/local-cpu/override",
                headers=scaling.admin, json={"replicas": 1, "for_s": 600, "reason": "end of the stream test"})
            assert ended.status_code == 200, ended.text
            return await asyncio.gather(*tasks), on_replica_1

    results, on_replica_1 = asyncio.run(streams())
    assert on_replica_1 >= 1, "the gateway sent no generation to replica 1"
    assert all(finish in ("length", "stop") for _, finish in results), results
    wait_for("the chat replica drains and stops", lambda: scaling.state("local-cpu-1") == "stopped", timeout_s=60)
    assert metric_sum(f"{scaling.stack.control_url}/metrics", "shunter_capacity_decisions_total",
                      {"model": "chat", "action": "down"}) >= 1


def _audit(scaling: Scaling, prefix: str) -> list[dict[str, Any]]:
    entries = httpx.get(f"{scaling.stack.control_url}/admin/v1/audit", params={"subject": "embed", "limit": 500},
                        headers=scaling.admin, timeout=5).json()
    return [e for e in entries if e["action"].startswith(prefix)]
