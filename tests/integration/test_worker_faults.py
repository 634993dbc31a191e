"""Faults on the real stack: tritonserver workers killed with SIGKILL under load, a dropped SSE
client reconnecting with Last-Event-ID, and the gateway process killed.

One stack for the module: a pool of two workers (chat, embed, tabular), so that a request whose
worker dies can go to the other one while the supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from control.stack import load_config
from settings.workers import worker_addresses
from tests.integration.conftest import KEYS, RunningStack, make_paths, metric_sum, running_stack, sse_events
from tests.integration.ports import port

pytestmark = pytest.mark.integration

GATEWAY_PORT, CONTROL_PORT, WORKER_BASE_PORT = port(28680), port(28681), port(28600)
PREMIUM = {"Authorization": f"Bearer {KEYS['premium']}"}
QUESTION = "Write a short story about a lighthouse keeper."
MAX_TOKENS = 48


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[RunningStack]:
    paths = make_paths(tmp_path_factory.mktemp("faults"), WORKER_BASE_PORT, models=("chat", "embed", "tabular"))
    pools = yaml.safe_load(paths.pools_file.read_text())
    pools["pools"][0]["workers"] = 2
    paths.pools_file.write_text(yaml.safe_dump(pools))
    with running_stack(paths, GATEWAY_PORT, CONTROL_PORT) as running:
        yield running


def _until(condition: Callable[[], bool], timeout_s: float, every_s: float = 0.02) -> float | None:
    """Seconds until ``condition()`` held, or None after ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if condition():
            return time.monotonic() - start
        time.sleep(every_s)
    return None


def _gateway_sees_ready(stack: RunningStack, worker: str) -> bool:
    return metric_sum(f"{stack.url}/metrics", "shunter_worker_model_ready", {"worker": worker, "model": "embed"}) == 1


def _triton_ready(stack: RunningStack, index: int) -> bool:
    address = worker_addresses(load_config(stack.paths))[index]
    try:
        return all(httpx.get(f"http://127.0.0.1:{address.http_port}/v2/models/{m}/ready", timeout=1).status_code
                   == 200 for m in address.models)
    except httpx.HTTPError:
        return False


def _kill_worker(stack: RunningStack, index: int) -> str:
    assert stack.stack.supervisor is not None
    worker = stack.stack.supervisor.workers[index]
    assert worker.process is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    return worker.address.name


def _wait_all_ready(stack: RunningStack) -> None:
    for index in range(2):
        assert _until(lambda i=index: _triton_ready(stack, i), 180, every_s=0.2) is not None  # type: ignore[misc]
    names = [a.name for a in worker_addresses(load_config(stack.paths))]
    assert _until(lambda: all(_gateway_sees_ready(stack, n) for n in names), 10) is not None


async def _load(stack: RunningStack, stop: asyncio.Event, results: list[int]) -> None:
    embed = {"model": "embed", "input": ["a lighthouse", "a keeper", "the sea"]}
    tabular = {"inputs": [{"name": "features", "datatype": "FP32", "shape": [2, 64], "data": [1.0] * 128}]}
    async with httpx.AsyncClient(base_url=stack.url, headers=PREMIUM, timeout=60) as client:
        async def loop(path: str, body: dict[str, object]) -> None:
            while not stop.is_set():  # at most 10 requests a second each: under the tenant's quota
                results.append((await client.post(path, json=body)).status_code)
                await asyncio.sleep(0.1)

        await asyncio.gather(*(loop("/v1/embeddings", embed) for _ in range(4)),
                             *(loop("/v2/models/tabular/infer", tabular) for _ in range(2)))


def test_a_killed_worker_costs_no_request_is_down_at_once_and_ready_as_soon_as_triton_is(
        faults: RunningStack) -> None:
    results: list[int] = []
    retries_before = metric_sum(f"{faults.url}/metrics", "shunter_worker_retries_total", {})

    async def scenario() -> tuple[str, float | None]:
        stop = asyncio.Event()
        load = asyncio.create_task(_load(faults, stop, results))
        await asyncio.sleep(2.0)
        killed = _kill_worker(faults, 0)
        down_s = await asyncio.to_thread(_until, lambda: not _gateway_sees_ready(faults, killed), 5.0)
        await asyncio.sleep(2.0)
        stop.set()
        await load
        return killed, down_s

    killed, down_s = asyncio.run(scenario())
    assert results and set(results) == {200}, {code: results.count(code) for code in set(results)}
    assert metric_sum(f"{faults.url}/metrics", "shunter_worker_retries_total", {}) > retries_before
    assert down_s is not None and down_s < 1.0, down_s  # marked down by the first failure, not the 1 s poll
    triton_s = _until(lambda: _triton_ready(faults, 0), 180, every_s=0.05)
    assert triton_s is not None
    lag_s = _until(lambda: _gateway_sees_ready(faults, killed), 10)
    assert lag_s is not None and lag_s < 1.0, lag_s
    assert httpx.get(f"{faults.url}/readyz", timeout=5).status_code == 200


def _stream(client: httpx.Client, headers: dict[str, str] | None = None,
            on_event: Callable[[int], bool] | None = None, max_tokens: int = MAX_TOKENS) -> list[tuple[str, str]]:
    """(id, data) of every event of a greedy streamed chat; ``on_event(n)`` after the n-th event,
    returning False to drop the connection there."""
    body: dict[str, object] = {"model": "chat", "messages": [{"role": "user", "content": QUESTION}],
                               "max_tokens": max_tokens, "temperature": 0, "stream": True}
    return sse_events(client, body, headers, on_event)


def _text(events: list[tuple[str, str]]) -> str:
    parts = []
    for _, data in events:
        if data.startswith("{"):
            chunk = json.loads(data)
            assert "error" not in chunk, chunk
            parts.extend(c["delta"].get("content", "") for c in chunk["choices"])
    return "".join(parts)


def _running_worker(stack: RunningStack, timeout_s: float = 3.0) -> int:
    """The worker whose engine runs a sequence now. The engine publishes its gauges every 0.25 s
    while busy, so a stream a few tokens old may not show yet: look again until ``timeout_s``."""
    addresses = worker_addresses(load_config(stack.paths))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for index, address in enumerate(addresses):
            url = f"http://127.0.0.1:{address.metrics_port}/metrics"
            try:
                if metric_sum(url, "shunter_llm_running_sequences", {}) > 0:
                    return index
            except httpx.HTTPError:
                continue
        time.sleep(0.02)
    raise AssertionError("no worker runs the stream")


def test_a_greedy_stream_survives_a_worker_kill_with_identical_text(faults: RunningStack) -> None:
    _wait_all_ready(faults)
    long_tokens = 4 * MAX_TOKENS  # on idle cores 48 tokens can be generated before the client reads its 4th event
    with faults.client() as client:
        undisturbed = _stream(client, max_tokens=long_tokens)
        killed: list[int] = []

        def kill_after_three(n: int) -> bool:
            if n == 4 and not killed:
                killed.append(_running_worker(faults))
                _kill_worker(faults, killed[0])
            return True

        disturbed = _stream(client, on_event=kill_after_three, max_tokens=long_tokens)
    assert killed
    assert disturbed[-1][1] == "[DONE]"
    assert _text(disturbed) == _text(undisturbed) != ""
    request_id = disturbed[0][0].rpartition(":")[0]
    assert [e for e, _ in disturbed] == [f"{request_id}:{n}" for n in range(1, len(disturbed) + 1)]
    assert metric_sum(f"{faults.url}/metrics", "shunter_stream_resumes_total", {"kind": "worker"}) >= 1


def test_a_client_that_drops_its_stream_gets_the_rest_with_last_event_id(faults: RunningStack) -> None:
    _wait_all_ready(faults)
    with faults.client() as client:
        whole = _stream(client)
        first = _stream(client, on_event=lambda n: n < 4)
        rest = _stream(client, headers={"Last-Event-ID": first[-1][0]})
    assert rest[-1][1] == "[DONE]"
    assert _text(first) + _text(rest) == _text(whole)
    request_id = first[0][0].rpartition(":")[0]
    assert [e for e, _ in first + rest] == [f"{request_id}:{n}" for n in range(1, len(first) + len(rest) + 1)]


def test_the_supervisor_restarts_a_killed_gateway(faults: RunningStack) -> None:
    supervisor = faults.stack.gateway_supervisor
    assert supervisor is not None
    before = supervisor.processes[0]
    before.send_signal(signal.SIGKILL)
    assert _until(lambda: supervisor.restarts() == [1], 120, every_s=0.1) is not None
    assert supervisor.processes[0].pid != before.pid
    assert httpx.get(f"{faults.url}/readyz", timeout=5).status_code == 200
    assert supervisor.gave_up is None


def test_a_stream_whose_workers_all_die_past_its_deadline_ends_with_worker_failed(faults: RunningStack) -> None:
    _wait_all_ready(faults)
    with faults.client() as client:
        def kill_everything(n: int) -> bool:
            if n == 3:
                _kill_worker(faults, 0)
                _kill_worker(faults, 1)
            return True

        events = _stream(client, headers={"X-Deadline-Ms": "1500"}, on_event=kill_everything)
    last = json.loads(events[-1][1])
    assert last["error"]["code"] == "worker_failed", last
    assert "[DONE]" not in [data for _, data in events]
    _wait_all_ready(faults)
