"""Scale-to-zero on the real stack: ``vision`` idles to zero replicas, requests that then arrive
are held in the gateway's fair queue while control loads it, and all are answered; a request
whose deadline is shorter than the cold start is refused at once.

A stack of its own (control with its capacity controller, one gateway, one Triton worker of a
pool serving ``vision`` and ``tabular``): ``capacity.yaml`` lets ``vision`` scale to zero after a
short idle time and decides every second, so the test takes about a minute.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import skimage.data
import tritonclient.http as httpclient
import yaml
from PIL import Image
from typer.testing import CliRunner

from cli.main import app as shunter
from control.stack import Listen, LocalStack
from settings.capacity_wire import REPLICAS_PATH, ReplicasDocument
from settings.paths import StackPaths
from tests.integration.conftest import KEYS, make_paths, metric_sum
from tests.integration.ports import port

pytestmark = pytest.mark.integration

GATEWAY_PORT = port(28950)
CONTROL_PORT = port(28951)
WORKER_BASE_PORT = port(28960)
IDLE_S = 4.0
ZERO_TIMEOUT_S = 90.0  # idle time + a decision + the unload's drain grace, on a busy 2-core machine
CAPACITY = {
    "controller": {"period_s": 1.0, "scale_down_window_s": 2.0},
    "models": {"vision": {"scale_to_zero": {"enabled": True, "idle_s": IDLE_S},
                          "pools": {"local-cpu": {"min_replicas": 0, "max_replicas": 1}}}},
}


@dataclass(frozen=True)
class ColdStack:
    paths: StackPaths
    stack: LocalStack

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{GATEWAY_PORT}"

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{CONTROL_PORT}"

    def replicas(self) -> ReplicasDocument:
        token = self.paths.admin_token_file.read_text().strip()
        response = httpx.get(f"{self.control_url}{REPLICAS_PATH}", headers={"Authorization": f"Bearer {token}"},
                             timeout=10)
        response.raise_for_status()
        return ReplicasDocument.model_validate_json(response.content)

    def vision_at_zero(self) -> bool:
        """Control lists vision on no replica and the gateway sees it READY on no worker."""
        listed = any("vision" in r.models for r in self.replicas().replicas)
        ready = metric_sum(f"{self.gateway_url}/metrics", "shunter_worker_model_ready", {"model": "vision"})
        return not listed and ready == 0

    def scale_status(self) -> dict[str, Any]:
        result = CliRunner().invoke(shunter, ["scale", "status", "--json", "--control-url", self.control_url,
                                              "--state-dir", str(self.paths.state_dir)])
        assert result.exit_code == 0, result.output
        document: dict[str, Any] = json.loads(result.output)
        return document


@pytest.fixture(scope="module")
def cold_stack(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[ColdStack]:
    paths = make_paths(tmp_path_factory.mktemp("scale_to_zero"), WORKER_BASE_PORT, models=("vision", "tabular"))
    paths.capacity_file.write_text(yaml.safe_dump(CAPACITY))
    stack = LocalStack(paths, Listen(gateway_port=GATEWAY_PORT, control_port=CONTROL_PORT))
    stack.start(log=lambda _: None)
    try:
        yield ColdStack(paths, stack)
    finally:
        stack.stop()


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


def _jpeg(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG")
    return buffer.getvalue()


def _vision_body() -> tuple[bytes, int]:
    tensor = httpclient.InferInput("image", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[_jpeg(skimage.data.chelsea())]], dtype=np.object_))
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor])
    return body, json_size or 0


async def _classify_while_watching(gateway_url: str, keys: list[str]) -> tuple[list[httpx.Response], float, int]:
    """``keys`` send one photo each at once; meanwhile the gateway's held-requests gauge is read.
    Returns the answers, the seconds until the last one, and the most requests seen held."""
    body, json_size = _vision_body()
    most_held = 0
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120.0) as client:
        started = time.monotonic()
        calls = [asyncio.ensure_future(client.post(
            "/v2/models/vision/infer", content=body,
            headers={"Authorization": f"Bearer {key}", "Inference-Header-Content-Length": str(json_size)}))
            for key in keys]
        while not all(call.done() for call in calls) and time.monotonic() - started < 120:
            text = (await client.get("/metrics")).text
            for line in text.splitlines():
                if line.startswith('shunter_capacity_held_requests{model="vision"}'):
                    most_held = max(most_held, int(float(line.split()[-1])))
            await asyncio.sleep(0.2)
        answers = await asyncio.gather(*calls)
        return list(answers), time.monotonic() - started, most_held


def test_vision_idles_to_zero_then_held_requests_are_all_answered(cold_stack: ColdStack) -> None:
    _wait_for(cold_stack.vision_at_zero, ZERO_TIMEOUT_S, "vision unloaded after its idle time")
    row = next(r for r in cold_stack.scale_status()["rows"] if r["model"] == "vision")
    assert row["ready"] == 0 and row["scale_to_zero"]
    with httpx.Client(base_url=cold_stack.gateway_url, timeout=10) as client:
        assert client.get("/readyz").status_code == 200  # a model at zero does not make the gateway unready

    keys = [KEYS["batch"], KEYS["standard"], KEYS["premium"], KEYS["standard"], KEYS["batch"]]
    answers, took_s, most_held = asyncio.run(_classify_while_watching(cold_stack.gateway_url, keys))
    assert [a.status_code for a in answers] == [200] * 5, [a.text[:200] for a in answers]
    for answer in answers:
        length = int(answer.headers["inference-header-content-length"])
        labels = httpclient.InferenceServerClient.parse_response_body(answer.content, header_length=length)
        assert {label.decode() for label in labels.as_numpy("labels")[0]} & {"tabby", "tiger cat", "Egyptian cat"}
    assert most_held >= 1, "no request was seen held while vision started"
    assert max(float(a.headers["x-queue-wait-ms"]) for a in answers) > 100  # they waited for the cold start

    status = cold_stack.scale_status()
    row = next(r for r in status["rows"] if r["model"] == "vision")
    assert row["last_cold_start_s"] is not None and row["last_cold_start_s"] > 0, row
    assert 0 < row["last_cold_start_s"] <= took_s + 1
    waits_ms = sorted(float(a.headers["x-queue-wait-ms"]) for a in answers)
    print(f"\nscale-to-zero: vision cold start {row['last_cold_start_s']:.2f} s (control's measure); held "
          f"requests' queue wait {waits_ms[0]:.0f}-{waits_ms[-1]:.0f} ms; all 5 answered in {took_s:.2f} s")
    control_metrics = f"{cold_stack.control_url}/metrics"
    vision = {"pool": "local-cpu", "model": "vision"}
    assert metric_sum(control_metrics, "shunter_capacity_cold_start_seconds", vision) > 0
    assert metric_sum(control_metrics, "shunter_capacity_decisions_total", {**vision, "action": "from_zero"}) >= 1
    assert metric_sum(f"{cold_stack.gateway_url}/metrics", "shunter_queue_wait_seconds_sum",
                      {"model": "vision", "pool": "local-cpu"}) > 0.1


def test_a_deadline_shorter_than_the_cold_start_is_503_model_cold_at_once(cold_stack: ColdStack) -> None:
    _wait_for(cold_stack.vision_at_zero, ZERO_TIMEOUT_S, "vision back at zero after its idle time")
    body, json_size = _vision_body()
    started = time.monotonic()
    response = httpx.post(f"{cold_stack.gateway_url}/v2/models/vision/infer", content=body, timeout=30, headers={
        "Authorization": f"Bearer {KEYS['standard']}", "Inference-Header-Content-Length": str(json_size),
        "X-Deadline-Ms": "200"})
    assert time.monotonic() - started < 2.0
    assert response.status_code == 503 and response.json()["code"] == "model_cold", response.text
    assert int(response.headers["retry-after"]) >= 1
