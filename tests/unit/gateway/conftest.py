"""The gateway in-process: the real app, configuration, tenants, scheduler and tokenizers, with
the workers replaced by ``FakeTransport``; requests go through httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from gateway.app import create_app
from gateway.composition import Gateway
from settings.paths import StackPaths
from settings.stack import StackConfig
from settings.workers import WorkerAddress
from tests.unit.gateway.fake_transport import FakeTransport

PREMIUM = {"Authorization": "Bearer demo-premium-key"}
STANDARD = {"Authorization": "Bearer demo-standard-key"}
BATCH = {"Authorization": "Bearer demo-batch-key"}


@dataclass
class InProcessGateway:
    app: FastAPI
    client: httpx.AsyncClient
    workers: FakeTransport
    logs: Path  # the state folder's logs (the access log: gateway.access.jsonl)

    @property
    def gateway(self) -> Gateway:
        gateway: Gateway = self.app.state.gateway
        return gateway

    def metric(self, name: str, **labels: str) -> float:
        value = self.gateway.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


def scratch_paths(root: Path, artifacts_dir: Path) -> StackPaths:
    """The shipped configuration with a state folder of its own under ``root`` (its logs, the
    access log among them, land there) that reuses the built artifacts."""
    (root / "artifacts").symlink_to(artifacts_dir)
    return StackPaths(state_dir=root)


@pytest.fixture
async def gw(artifacts_dir: Path, tmp_path: Path) -> AsyncIterator[InProcessGateway]:
    fakes: list[FakeTransport] = []

    def transport(config: StackConfig, addresses: Sequence[WorkerAddress], poll_interval_s: float) -> FakeTransport:
        fakes.append(FakeTransport(config, addresses=list(addresses)))
        return fakes[-1]

    app = create_app(scratch_paths(tmp_path, artifacts_dir), transport=transport)
    asgi = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=asgi, base_url="http://gateway", timeout=10.0) as client:
        yield InProcessGateway(app, client, fakes[0], tmp_path / "logs")
