"""Memory over a soak: resident memory of the chat engine, Triton and the gateway under steady load.

``python -m bench soak --minutes 10 --streams 8 --out bench/results/soak.json`` starts a private
stack (bench ports), keeps ``--streams`` closed-loop chat clients streaming mixed-length
generations (the benchmark prompt at 16 and 64 tokens, a long story at 200) through the gateway
for ``--minutes`` (``--workload embed``: closed-loop one-sentence embedding requests instead, to
tell what grows with streamed generations from what grows with any request), and samples
the RSS (``/proc/PID/status`` VmRSS, summed over a process tree) of the chat model's python-backend
stub, of the tritonserver process alone and of the gateway every ``--sample-s``. It reports, per
component, the median RSS of the first and the last minute, the growth between them, and the
least-squares slope over everything after the first minute (MiB per 10 minutes) and that slope
per request completed (KiB), plus the requests completed and any errors.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import httpx
import orjson
import typer

from bench.chat import GatewayChat
from bench.clients import gateway_http
from bench.harness import StackOptions, bench_stack
from bench.record import command_line, log

MIB = 1024 * 1024
app = typer.Typer(add_completion=False)
LONG_USER = "Write a very long, detailed story about a lighthouse keeper and a storm."


def rss_bytes(pid: int) -> int:
    """VmRSS of ``pid`` in bytes (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def chat_stub_pids(triton_pid: int) -> list[int]:
    """The python-backend stubs of tritonserver ``triton_pid`` running the chat model."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        if parent == triton_pid and "/chat/" in cmdline:
            found.append(int(entry.name))
    return found


def slope_mib_per_10min(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of (seconds, bytes), in MiB per 10 minutes."""
    if len(samples) < 2:
        return 0.0
    xs, ys = [t for t, _ in samples], [b / MIB for _, b in samples]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    return 600.0 * sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def _requester(http: httpx.AsyncClient, workload: str) -> Callable[[int], Awaitable[object]]:
    """The n-th request of a client: a chat stream of mixed length, or one embedding."""
    if workload == "embed":
        body = orjson.dumps({"model": "embed", "input": ["A short sentence about trains and stations."]})

        async def embed(n: int) -> object:
            response = await http.post("/v1/embeddings", content=body, headers={"Content-Type": "application/json"})
            response.raise_for_status()
            return None
        return embed
    chats = [GatewayChat(http, idle_timeout_s=60.0, max_tokens=16), GatewayChat(http, idle_timeout_s=60.0),
             GatewayChat(http, idle_timeout_s=60.0, user=LONG_USER, max_tokens=200)]
    return lambda n: chats[n % len(chats)].stream()


async def _load(url: str, key: str, streams: int, workload: str, stop_at: float, counts: dict[str, int]) -> None:
    http = gateway_http(url, key, max_connections=streams + 4, timeout_s=300.0)
    request = _requester(http, workload)

    async def client(index: int) -> None:
        n = index
        while time.monotonic() < stop_at:
            try:
                await request(n)
                counts["requests"] += 1
            except Exception:  # counted; the soak goes on
                counts["errors"] += 1
            n += 1

    try:
        await asyncio.gather(*(client(i) for i in range(streams)))
    finally:
        await http.aclose()


async def _sample(pids: dict[str, list[int]], stop_at: float, every_s: float,
                  series: dict[str, list[tuple[float, int]]]) -> None:
    started = time.monotonic()
    while time.monotonic() < stop_at:
        now = time.monotonic() - started
        for name, group in pids.items():
            series[name].append((now, sum(rss_bytes(p) for p in group)))
        await asyncio.sleep(every_s)


def summarize(series: dict[str, list[tuple[float, int]]], requests: int) -> dict[str, Any]:
    summary = {}
    for name, samples in series.items():
        end = samples[-1][0]
        first = [b for t, b in samples if t <= 60.0]
        last = [b for t, b in samples if t >= end - 60.0]
        settled = [(t, b) for t, b in samples if t > 60.0]
        summary[name] = {"first_minute_mib": statistics.median(first) / MIB,
                         "last_minute_mib": statistics.median(last) / MIB,
                         "growth_mib": (statistics.median(last) - statistics.median(first)) / MIB,
                         "slope_mib_per_10min": slope_mib_per_10min(settled),
                         "kib_per_request": slope_mib_per_10min(settled) / 600.0 * end * 1024 / max(1, requests)}
    return summary


@app.command()
def main(minutes: Annotated[float, typer.Option(min=1.0, max=60.0)] = 10.0,
         streams: Annotated[int, typer.Option(min=1, max=64)] = 8,
         workload: Annotated[str, typer.Option(help="chat (streamed generations) or embed")] = "chat",
         sample_s: Annotated[float, typer.Option(min=0.5)] = 5.0,
         api_key: str = "demo-premium-key",
         out: Annotated[Path, typer.Option()] = Path("bench/results/soak.json")) -> None:
    with bench_stack(StackOptions(), log=log) as endpoints:
        assert endpoints.triton_pid is not None and endpoints.gateway_pid is not None
        pids = {"chat_stub": chat_stub_pids(endpoints.triton_pid), "tritonserver": [endpoints.triton_pid],
                "gateway": [endpoints.gateway_pid]}
        if workload not in ("chat", "embed"):
            raise typer.BadParameter("workload must be chat or embed")
        log(f"soaking {minutes:g} min with {streams} {workload} clients; chat stubs {pids['chat_stub']}")
        series: dict[str, list[tuple[float, int]]] = {name: [] for name in pids}
        counts = {"requests": 0, "errors": 0}
        stop_at = time.monotonic() + minutes * 60.0

        async def run() -> None:
            await asyncio.gather(_load(endpoints.gateway_url, api_key, streams, workload, stop_at, counts),
                                 _sample(pids, stop_at, sample_s, series))
        asyncio.run(run())
    rss = summarize(series, counts["requests"])
    result = {"command": command_line(), "minutes": minutes, "streams": streams, "workload": workload, **counts,
              "rss": rss, "series": series}
    out.write_text(json.dumps(result, indent=2))
    print("| component | RSS first minute (MiB) | RSS last minute (MiB) | growth (MiB) | slope after minute 1 "
          "(MiB / 10 min) | slope per request (KiB) |\n|---|---:|---:|---:|---:|---:|")
    for name, row in rss.items():
        print(f"| {name} | {row['first_minute_mib']:.0f} | {row['last_minute_mib']:.0f} | {row['growth_mib']:+.1f} | "
              f"{row['slope_mib_per_10min']:+.1f} | {row['kib_per_request']:+.2f} |")
    print(f"{workload} requests {counts['requests']}, errors {counts['errors']}")

