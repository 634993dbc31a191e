"""One real local stack (Triton workers + gateway) per test session, on ports of its own.

The stack uses a copy of the shipped configuration whose pool listens on ``WORKER_BASE_PORT``,
a temporary state directory whose ``artifacts`` links to the artifacts `make setup` built, and a
temporary model repository; it is stopped (Triton cleanly, clients first) at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.tenancy.two_pools import Ports, TwoPoolStack
from control.stack import Listen, LocalStack, load_config
from settings.paths import StackPaths
from settings.workers import WorkerAddress, worker_addresses
from tests.integration.ports import port

GATEWAY_PORT = port(28080)
CONTROL_PORT = port(28081)
WORKER_BASE_PORT = port(28100)
KEYS = {"premium": "demo-premium-key", "standard": "demo-standard-key", "batch": "demo-batch-key"}


@dataclass(frozen=True)
class RunningStack:
    url: str
    paths: StackPaths
    worker: WorkerAddress
    stack: LocalStack

    def client(self, key: str = KEYS["premium"], timeout_s: float = 120.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)


def make_paths(root: Path, base_port: int, models: tuple[str, ...] | None = None) -> StackPaths:
    """A config dir copying the shipped one with the pool moved to ``base_port`` (and optionally
    serving only ``models``), plus a state dir that reuses the built artifacts."""
    shipped = StackPaths()
    config_dir, state_dir = root / "config", root / "state"
    config_dir.mkdir(parents=True)
    state_dir.mkdir(parents=True)
    for name in ("models.yaml", "tenants.yaml", "scheduling.yaml"):
        shutil.copy(shipped.config_dir / name, config_dir / name)
    pools = yaml.safe_load(shipped.pools_file.read_text())
    pools["pools"][0]["base_port"] = base_port
    if models is not None:
        pools["pools"][0]["models"] = list(models)
    (config_dir / "pools.yaml").write_text(yaml.safe_dump(pools))
    (state_dir / "artifacts").symlink_to(shipped.artifacts)
    return StackPaths(config_dir=config_dir, state_dir=state_dir)  # the repository under state_dir


@contextlib.contextmanager
def running_stack(paths: StackPaths, gateway_port: int, control_port: int) -> Iterator[RunningStack]:
    """``shunter up`` on ``paths`` with the gateway and control on these ports, stopped on exit."""
    local = LocalStack(paths, Listen(gateway_port=gateway_port, control_port=control_port))
    local.start(log=lambda _: None)
    try:
        yield RunningStack(f"http://127.0.0.1:{gateway_port}", paths, worker_addresses(load_config(paths))[0], local)
    finally:
        local.stop()


def sse_events(client: httpx.Client, body: dict[str, object], headers: dict[str, str] | None = None,
               on_event: Callable[[int], bool] | None = None) -> list[tuple[str, str]]:
    """(id, data) of every SSE event of a streamed ``/v1/chat/completions``; ``on_event(n)`` after
    the n-th event, returning False to drop the connection there."""
    events: list[tuple[str, str]] = []
    event_id = ""
    with client.stream("POST", "/v1/chat/completions", json=body, headers=headers or {}) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                events.append((event_id, line[6:]))
                if on_event is not None and not on_event(len(events)):
                    break
    return events


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[RunningStack]:
    with running_stack(make_paths(tmp_path_factory.mktemp("stack"), WORKER_BASE_PORT), GATEWAY_PORT,
                       CONTROL_PORT) as running:
        yield running


def metric_sum(url: str, name: str, labels: dict[str, str]) -> float:
    """The sum of the series of ``name`` whose labels include ``labels`` on the Prometheus page at
    ``url`` (0 when there is none)."""
    text = httpx.get(url, timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


def worker_counter(stack: RunningStack, name: str, labels: dict[str, str]) -> float:
    """A metric of the stack's Triton worker (``metric_sum``)."""
    return metric_sum(f"http://127.0.0.1:{stack.worker.metrics_port}/metrics", name, labels)


async def stream_chat(client: httpx.AsyncClient, content: str, max_tokens: int,
                      first_token: asyncio.Event | None = None) -> tuple[str, str | None]:
    """One greedy streamed chat completion: its whole text and its finish reason (asserting that
    it answered 200 and carried no error event). ``first_token`` is set when its first text arrives."""
    body = {"model": "chat", "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens, "temperature": 0, "stream": True}
    parts, finish = [], None
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                assert "error" not in chunk, chunk
                parts.append(chunk["choices"][0]["delta"].get("content", ""))
                if first_token is not None and parts[-1]:
                    first_token.set()
                finish = chunk["choices"][0].get("finish_reason") or finish
    return "".join(parts), finish


TWO_POOL_BASE_PORT = port(28400)


@pytest.fixture(scope="session")
def two_pools(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[TwoPoolStack]:
    """Two pools (large/eu-west, small/us-east) with a fair gateway and a FIFO gateway."""
    stack = TwoPoolStack(tmp_path_factory.mktemp("two_pools"), Ports.from_base(TWO_POOL_BASE_PORT))
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()
