"""The gateway's event loop under a 50 MB body attack: probe latency p99 and the time to refuse.

``python -m bench loop_lag [--phase-s 15] [--attackers 3] [--probe-interval-ms 10] [--base-port 18700]``

A private stack serving only ``embed`` is started on ports of its own. Two phases of ``--phase-s``
each, quiet then under attack, measure the same two things from this process: a ``GET /healthz``
every ``--probe-interval-ms`` on a keep-alive connection (the gateway does nothing for it, so its
latency is the event loop's lag plus a loopback round trip: an upper bound of the lag) and a
premium embedding every 100 ms (what a paying tenant waits for meanwhile); beside them, the loop's
own lag as the gateway measures it (``shunter_gateway_event_loop_lag_seconds``, read from
``/metrics`` around each phase: no client scheduling noise in it). During the attack,
``--attackers`` other processes (so their uploads do not share this process's event loop) send,
one after another and in a loop: 50 MB with a declared ``Content-Length`` (authenticated), 50 MB
chunked without one (authenticated: the gateway reads up to its limit), 50 MB without an API key,
and 4 MB of JSON holding 120,000 small objects (``too_many_values``); each records its status
and the seconds from sending to the answer. Report: ``--out`` (JSON) and the table on stdout; the
figures are in docs/benchmarks.md ("Hostile input").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import multiprocessing
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from prometheus_client.parser import text_string_to_metric_families

from bench.harness import BENCH_RESULTS, bench_stack, private_stack_options
from bench.load import percentile
from bench.record import command_line, log, machine_facts
from control.capacity.signals import quantile
from control.stack import free_port

app = typer.Typer(add_completion=False)
MIB = 1 << 20
ATTACK_BYTES = 50 * MIB
PREMIUM, BATCH = "demo-premium-key", "demo-batch-key"
LOOP_LAG_P99_TARGET_MS = 20.0
SMALL_OBJECTS = b'{"model": "embed", "input": "x", "junk": [' + b'{"role": "user", "content": "a"},' * 120_000 + b"{}]}"


async def _chunks(total: int, chunk: int = 256 * 1024) -> AsyncIterator[bytes]:
    block = b" " * chunk
    for _ in range(total // chunk):
        yield block


def _attacks() -> Iterator[tuple[str, dict[str, Any]]]:
    """The attack kinds in order, as (kind, keyword arguments of httpx's ``post``)."""
    auth = {"Authorization": f"Bearer {BATCH}", "content-type": "application/json"}
    while True:
        yield "declared_50mb", {"url": "/v1/chat/completions", "content": b" " * ATTACK_BYTES, "headers": auth}
        yield "chunked_50mb", {"url": "/v1/embeddings", "content": _chunks(ATTACK_BYTES), "headers": auth}
        yield "no_key_50mb", {"url": "/v1/embeddings", "content": b" " * ATTACK_BYTES,
                              "headers": {"content-type": "application/json"}}
        yield "json_120k_objects", {"url": "/v1/embeddings", "content": SMALL_OBJECTS, "headers": auth}


async def _attack(url: str, until: float) -> list[tuple[str, int, float]]:
    results: list[tuple[str, int, float]] = []
    kinds = _attacks()
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        while time.monotonic() < until:
            kind, request = next(kinds)
            started = time.perf_counter()
            try:
                status = (await client.post(**request)).status_code
            except httpx.HTTPError:
                status = 0
            results.append((kind, status, time.perf_counter() - started))
    return results


def _attacker(url: str, seconds: float, results: Any) -> None:
    results.put(asyncio.run(_attack(url, time.monotonic() + seconds)))


async def _probe(url: str, seconds: float, interval_s: float) -> tuple[list[float], list[float]]:
    """Health probe latencies and premium embedding latencies (seconds) over ``seconds``."""
    probes: list[float] = []
    embeds: list[float] = []
    until = time.monotonic() + seconds

    async def health(client: httpx.AsyncClient) -> None:
        while time.monotonic() < until:
            started = time.perf_counter()
            await client.get("/healthz")
            probes.append(time.perf_counter() - started)
            await asyncio.sleep(interval_s)

    async def embed(client: httpx.AsyncClient) -> None:
        headers = {"Authorization": f"Bearer {PREMIUM}"}
        for i in range(1_000_000):
            if time.monotonic() >= until:
                break
            started = time.perf_counter()
            response = await client.post("/v1/embeddings", json={"model": "embed", "input": f"premium {i}"},
                                         headers=headers)
            if response.status_code == 200:
                embeds.append(time.perf_counter() - started)
            await asyncio.sleep(0.1)

    async with httpx.AsyncClient(base_url=url, timeout=60) as probe_client, \
            httpx.AsyncClient(base_url=url, timeout=60) as embed_client:
        await asyncio.gather(health(probe_client), embed(embed_client))
    return probes, embeds


def _ms(values: list[float], q: float) -> float | None:
    return round(percentile(values, q) * 1000, 2) if values else None


def loop_lag_buckets(url: str) -> dict[float, float]:
    """The gateway's cumulative loop-lag histogram: upper bound (s) -> observations."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {float(sample.labels["le"]): sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "shunter_gateway_event_loop_lag_seconds_bucket"}


def _lag_ms(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    buckets = tuple(sorted((bound, count - before.get(bound, 0.0)) for bound, count in after.items()))
    value = quantile(buckets, q)
    return round(value * 1000, 2) if value is not None else None


def _phase(probes: list[float], embeds: list[float], lag_before: dict[float, float],
           lag_after: dict[float, float]) -> dict[str, Any]:
    return {"probes": len(probes), "probe_p50_ms": _ms(probes, 50), "probe_p99_ms": _ms(probes, 99),
            "probe_max_ms": _ms(probes, 100), "premium_embeddings": len(embeds),
            "premium_p50_ms": _ms(embeds, 50), "premium_p99_ms": _ms(embeds, 99),
            "loop_lag_samples": int(lag_after.get(math.inf, 0.0) - lag_before.get(math.inf, 0.0)),
            "loop_lag_p50_ms": _lag_ms(lag_before, lag_after, 0.5),
            "loop_lag_p99_ms": _lag_ms(lag_before, lag_after, 0.99)}


def _attack_summary(results: list[tuple[str, int, float]]) -> dict[str, Any]:
    by_kind: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for kind, status, seconds in results:
        by_kind[kind].append((status, seconds))
    return {kind: {"requests": len(rows), "statuses": sorted({s for s, _ in rows}),
                   "refused_p50_ms": _ms([t for _, t in rows], 50), "refused_max_ms": _ms([t for _, t in rows], 100)}
            for kind, rows in sorted(by_kind.items())}


def measure(url: str, phase_s: float, attackers: int, interval_s: float) -> dict[str, Any]:
    """The quiet phase, then the attack phase; see the module docstring."""
    log(f"quiet phase: {phase_s:.0f} s")
    lag_start = loop_lag_buckets(url)
    quiet = _phase(*asyncio.run(_probe(url, phase_s, interval_s)), lag_start, lag_quiet := loop_lag_buckets(url))
    log(f"attack phase: {phase_s:.0f} s, {attackers} attacker processes")
    queue: Any = multiprocessing.get_context("spawn").Queue()
    processes = [multiprocessing.get_context("spawn").Process(target=_attacker, args=(url, phase_s, queue))
                 for _ in range(attackers)]
    for process in processes:
        process.start()
    attacked = _phase(*asyncio.run(_probe(url, phase_s, interval_s)), lag_quiet, loop_lag_buckets(url))
    results: list[tuple[str, int, float]] = []
    for _ in processes:
        results.extend(queue.get(timeout=phase_s + 180))
    for process in processes:
        process.join(timeout=30)
    return {"quiet": quiet, "attack": attacked, "attacks": _attack_summary(results),
            "target_probe_p99_ms": LOOP_LAG_P99_TARGET_MS,
            "target_met": attacked["probe_p99_ms"] is not None and attacked["probe_p99_ms"] <= LOOP_LAG_P99_TARGET_MS,
            "loop_lag_target_met": (attacked["loop_lag_p99_ms"] is not None
                                    and attacked["loop_lag_p99_ms"] <= LOOP_LAG_P99_TARGET_MS)}


def markdown(report: dict[str, Any]) -> str:
    lines = ["| phase | loop lag p50 / p99 (ms, in the gateway) | health probes | probe p50 / p99 / max (ms) "
             "| premium embeddings | premium p50 / p99 (ms) |", "|---|---|---|---|---|---|"]
    for name in ("quiet", "attack"):
        p = report[name]
        lines.append(f"| {name} | {p['loop_lag_p50_ms']} / {p['loop_lag_p99_ms']} | {p['probes']} | "
                     f"{p['probe_p50_ms']} / {p['probe_p99_ms']} / {p['probe_max_ms']} | "
                     f"{p['premium_embeddings']} | {p['premium_p50_ms']} / {p['premium_p99_ms']} |")
    lines += ["", "| attack | requests | statuses | time to refuse p50 / max (ms) |", "|---|---|---|---|"]
    for kind, a in report["attacks"].items():
        lines.append(f"| {kind} | {a['requests']} | {', '.join(map(str, a['statuses']))} | "
                     f"{a['refused_p50_ms']} / {a['refused_max_ms']} |")
    return "\n".join(lines)


@app.command()
def main(phase_s: Annotated[float, typer.Option(help="seconds of each phase")] = 15.0,
         attackers: Annotated[int, typer.Option(help="attacking processes")] = 3,
         probe_interval_ms: Annotated[float, typer.Option(help="pause between health probes")] = 10.0,
         base_port: Annotated[int, typer.Option(help="first Triton port of the private stack")] = 18700,
         out: Annotated[Path, typer.Option(help="JSON report")] = BENCH_RESULTS / "loop_lag.json") -> None:
    with private_stack_options() as defaults:
        options = dataclasses.replace(defaults, models=("embed",), base_port=base_port,
                                      gateway_port=free_port(), control_port=free_port())
        with bench_stack(options, log=log) as endpoints:
            report = measure(endpoints.gateway_url, phase_s, attackers, probe_interval_ms / 1000)
    report = {"command": command_line(), "machine": machine_facts(), **report}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(markdown(report))
    log(f"report in {out}")


if __name__ == "__main__":
    app()
