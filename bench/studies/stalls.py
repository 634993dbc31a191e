"""How often a queued request waits ~500 ms in Triton, by the model's instance count.

``python -m bench studies.stalls --model embed --clients 4 --instances 1,2 --duration-s 8`` starts, for
each instance count, one Triton worker serving only ``--model`` (ports from 38100), runs a
closed loop of ``--clients`` direct gRPC clients for ``--duration-s`` and prints the requests,
p50, p99 and how many took over ``--stall-ms``. It found the 500 ms waits of Triton 2.51's
dynamic batcher with one python-backend instance that made ``config/models.yaml`` run two.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from bench.clients import DirectClient
from bench.load import percentile
from bench.workload import Workload
from control.repository import render_repository
from control.stack import load_config
from control.supervisor import Supervisor
from control.triton_runtime import resolve_runtime
from settings.paths import StackPaths
from settings.stack import StackConfig
from settings.workers import worker_addresses

app = typer.Typer(add_completion=False)
BASE_PORT = 38100


def _config(model: str, instances: int) -> StackConfig:
    config = load_config(StackPaths())
    spec = next(m for m in config.models if m.name == model).model_copy(update={"instances": instances})
    pools = (config.pools[0].model_copy(update={"models": (model,), "base_port": BASE_PORT, "workers": 1}),)
    return StackConfig(triton=config.triton, pools=pools, models=(spec,))


async def _latencies_ms(grpc_url: str, model: str, clients: int, duration_s: float) -> list[float]:
    client = DirectClient(grpc_url, Workload.build())
    send = client.sender(model)
    latencies: list[float] = []

    async def loop(offset: int, until: float, record: bool) -> None:
        i = offset
        while time.perf_counter() < until:
            started = time.perf_counter()
            await send(i)
            if record:
                latencies.append((time.perf_counter() - started) * 1000)
            i += 1

    warm_until = time.perf_counter() + 1.0
    await asyncio.gather(*(loop(c * 1000, warm_until, False) for c in range(clients)))
    until = time.perf_counter() + duration_s
    await asyncio.gather(*(loop(c * 1000, until, True) for c in range(clients)))
    await client.aclose()
    return latencies


@app.command()
def main(
    model: Annotated[str, typer.Option()] = "embed",
    clients: Annotated[int, typer.Option()] = 4,
    instances: Annotated[str, typer.Option(help="comma-separated instance counts")] = "1,2",
    duration_s: Annotated[float, typer.Option()] = 8.0,
    stall_ms: Annotated[float, typer.Option()] = 300.0,
) -> None:
    for count in [int(n) for n in instances.split(",")]:
        config = _config(model, count)
        with tempfile.TemporaryDirectory(prefix="stalls-") as tmp:
            paths = StackPaths()
            render_repository(config, paths.artifacts, Path(tmp) / "repository")
            runtime = resolve_runtime(config.triton, paths.state_dir)
            supervisor = Supervisor(config, runtime, Path(tmp) / "repository", Path(tmp) / "logs")
            supervisor.start()
            try:
                worker = worker_addresses(config)[0]
                lat = asyncio.run(_latencies_ms(f"{worker.host}:{worker.grpc_port}", model, clients, duration_s))
            finally:
                supervisor.stop()
        stalls = sum(1 for v in lat if v > stall_ms)
        print(f"{model} instances={count} clients={clients}: {len(lat)} requests in {duration_s:.0f} s, "
              f"p50 {percentile(lat, 50):.1f} ms, p99 {percentile(lat, 99):.1f} ms, over {stall_ms:.0f} ms: {stalls}")

