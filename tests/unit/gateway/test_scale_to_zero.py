"""Scale-to-zero as a client sees it, in-process (the real app and configuration with
``vision`` configured to scale to zero; the fake transport's workers): held requests, their
status, the answers when the cold start is too slow, readiness and the controller's signals."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest

from gateway.app import create_app
from settings.paths import PROJECT_ROOT, StackPaths
from settings.stack import StackConfig
from settings.workers import WorkerAddress
from tests.unit.gateway.conftest import BATCH, PREMIUM, STANDARD, InProcessGateway
from tests.unit.gateway.fake_transport import FakeTransport

COLD_START_S = 0.5
IMAGE = {"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": ["not really a jpeg"]}]}


@pytest.fixture
async def cold(tmp_path: Path, artifacts_dir: object) -> AsyncIterator[InProcessGateway]:
    """The gateway with vision allowed to scale to zero, and at zero (loaded on no worker)."""
    config_dir = tmp_path / "config"
    shutil.copytree(PROJECT_ROOT / "config", config_dir)
    capacity = (config_dir / "capacity.yaml").read_text()
    capacity = capacity.replace("    # scale_to_zero: {enabled: true, idle_s: 900}   # then min_replicas must be 0\n"
                                "    pools:\n      local-cpu: {min_replicas: 1, max_replicas: 1}",
                                "    scale_to_zero: {enabled: true, idle_s: 5}\n"
                                "    pools:\n      local-cpu: {min_replicas: 0, max_replicas: 1}")
    assert "idle_s: 5" in capacity, "config/capacity.yaml's vision entry changed: update this fixture"
    (config_dir / "capacity.yaml").write_text(capacity)
    with (config_dir / "gateway.yaml").open("a") as gateway_yaml:
        gateway_yaml.write(f"\ncold_start_s: {COLD_START_S}\n")
    fakes: list[FakeTransport] = []

    def transport(config: StackConfig, addresses: Sequence[WorkerAddress], poll_interval_s: float) -> FakeTransport:
        fakes.append(FakeTransport(config, addresses=list(addresses), unloaded={"vision"}))
        return fakes[-1]

    app = create_app(StackPaths(config_dir=config_dir, state_dir=PROJECT_ROOT / "var"), transport=transport)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway",
                              timeout=10.0) as client:
        yield InProcessGateway(app, client, fakes[0], PROJECT_ROOT / "var" / "logs")


async def _held(gw: InProcessGateway, count: int) -> None:
    for _ in range(200):
        if gw.gateway.dispatcher.scheduler.held_requests().get("vision", 0) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} requests held")


async def test_requests_at_zero_are_held_shown_waiting_and_all_answered_once_a_worker_is_ready(
        cold: InProcessGateway) -> None:
    keys = [PREMIUM, STANDARD, BATCH, STANDARD, PREMIUM]
    calls = [asyncio.ensure_future(cold.client.post("/v2/models/vision/infer", headers=h, json=IMAGE)) for h in keys]
    await _held(cold, 5)
    assert not any(call.done() for call in calls) and cold.workers.tensor_calls == []
    listed = (await cold.client.get("/v1/requests", headers=STANDARD,
                                    params={"status": "waiting_for_capacity"})).json()["data"]
    assert len(listed) == 2
    detail = (await cold.client.get(f"/v1/requests/{listed[0]['id']}", headers=STANDARD)).json()
    assert detail["status"] == "waiting_for_capacity" and detail["queue_position"] in (2, 3)  # premium first
    assert 0 <= detail["estimated_start_in_s"] <= COLD_START_S
    metrics = (await cold.client.get("/metrics")).text
    assert 'shunter_capacity_held_requests{model="vision"} 5.0' in metrics
    cold.workers.unloaded.clear()  # control loaded vision: the next readiness refresh sees it
    await cold.gateway.transport.refresh()
    answers = await asyncio.wait_for(asyncio.gather(*calls), 5.0)
    assert [a.status_code for a in answers] == [200] * 5
    assert [c[1] for c in cold.workers.tensor_calls] == ["vision"] * 5
    status = (await cold.client.get(f"/v1/requests/{listed[0]['id']}", headers=STANDARD)).json()
    assert status["status"] == "completed" and status["queue_wait_s"] > 0


async def test_a_deadline_shorter_than_the_cold_start_is_503_model_cold_at_once(cold: InProcessGateway) -> None:
    response = await cold.client.post("/v2/models/vision/infer", headers={**STANDARD, "X-Deadline-Ms": "100"},
                                      json=IMAGE)
    assert response.status_code == 503
    assert response.json()["code"] == "model_cold" and response.headers["retry-after"] == "1"
    assert cold.gateway.dispatcher.scheduler.held_requests() == {}


async def test_a_held_request_whose_deadline_passes_is_504_model_cold(cold: InProcessGateway) -> None:
    response = await cold.client.post("/v2/models/vision/infer", headers={**STANDARD, "X-Deadline-Ms": "800"},
                                      json=IMAGE)
    assert response.status_code == 504
    assert response.json()["code"] == "model_cold" and "retry-after" in response.headers
    status = (await cold.client.get(f"/v1/requests/{response.headers['x-request-id']}", headers=STANDARD)).json()
    assert status["outcome"] == "expired(model_cold)"
    assert cold.metric("shunter_scheduled_outcomes_total", tier="standard", model="vision", outcome="expired") == 1


async def test_a_model_at_zero_does_not_make_the_gateway_unready(cold: InProcessGateway) -> None:
    ready = await cold.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["models"]["vision"] is False
    # KServe: the model takes requests at zero (held), as a KServe InferenceService scaled to zero stays Ready
    assert (await cold.client.get("/v2/models/vision/ready", headers=STANDARD)).status_code == 200
    cold.workers.unloaded.add("tabular")  # tabular may not scale to zero: its absence is unready
    await cold.gateway.transport.refresh()
    assert (await cold.client.get("/readyz")).status_code == 503
