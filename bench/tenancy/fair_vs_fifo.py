"""The noisy-neighbour and overload scenarios on two pools, the fair and the FIFO gateway side by side.

``python -m bench tenancy [--repeats 3] [--noisy-s 20] [--overload-s 20]``

Starts the two-pool stack (fair gateway and FIFO gateway on the same workers) unless
``--fair-url``/``--fifo-url`` point at running ones, runs each scenario ``--repeats`` times per
policy (policies alternate inside each repeat, so both see the same machine), writes every
observation summary to ``bench/results/tenancy.json`` and prints the Markdown tables for
``docs/benchmarks.md`` (medians over repeats).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from bench.harness import BENCH_RESULTS
from bench.load import median
from bench.record import command_line
from bench.tenancy.scenarios import capacity, noisy_neighbour, overload, summarize, tier_summary
from bench.tenancy.two_pools import Ports, TwoPoolStack

app = typer.Typer(add_completion=False)

SLO_S = {"gold": 2.0, "silver": 4.0, "bronze": 10.0}


def wait_idle(url: str, timeout_s: float = 90) -> None:
    """Until the gateway reports nothing queued or in flight (bounded by ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    prefixes = ("shunter_queue_depth{", "shunter_in_flight_requests{")
    while time.monotonic() < deadline:
        text = httpx.get(f"{url}/metrics", timeout=5).text
        if not [line for line in text.splitlines() if line.startswith(prefixes) and not line.endswith(" 0.0")]:
            return
        time.sleep(0.5)


def run_noisy(fair_url: str, fifo_url: str, duration_s: float) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, url, flood in (("alone", fair_url, False), ("fair", fair_url, True), ("fifo", fifo_url, True)):
        seen = asyncio.run(noisy_neighbour(url, duration_s, flood))
        wait_idle(url)
        result[name] = {"quiet": asdict(summarize(seen, "quiet")), "noisy": asdict(summarize(seen, "noisy"))}
    return result


def run_overload(fair_url: str, fifo_url: str, duration_s: float) -> dict[str, Any]:
    per_s = asyncio.run(capacity(fair_url, 8))
    wait_idle(fair_url)
    result: dict[str, Any] = {"capacity_per_s": per_s}
    for name, url in (("fair", fair_url), ("fifo", fifo_url)):
        seen = asyncio.run(overload(url, per_s, duration_s))
        wait_idle(url)
        result[name] = {tenant: asdict(tier_summary(seen, tenant, slo)) for tenant, slo in SLO_S.items()}
    return result


def _noisy_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["| policy | quiet p99 queue wait (ms) | quiet TTFT p50 / p99 (s) | quiet in-engine p99 (s) "
             "| quiet embed p99 (s) | noisy: ok / sent | noisy refusals |",
             "|---|---|---|---|---|---|---|"]
    for name in ("alone", "fair", "fifo"):
        def m(key: str, who: str = "quiet", name: str = name) -> float:
            return median([run[name][who][key] for run in runs])
        refusals = runs[-1][name]["noisy"]["rejected"]
        lines.append(f"| {name} | {m('queue_wait_p99_ms'):.1f} | {m('ttft_p50_s'):.2f} / {m('ttft_p99_s'):.2f} "
                     f"| {m('engine_p99_s'):.2f} | {m('embed_p99_s'):.3f} | {m('ok', 'noisy'):.0f} / "
                     f"{m('requests', 'noisy'):.0f} | {refusals or '-'} |")
    return lines


def _overload_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = [f"capacity (closed loop, chat, 16 tokens): {median([r['capacity_per_s'] for r in runs]):.2f} req/s; "
             "offered 3x: premium 0.5x, standard 1x, batch 1.5x", "",
             "| policy | tier | offered | completed | SLO attainment | TTFT p99 (s) | rejected (last run) |",
             "|---|---|---|---|---|---|---|"]
    for name in ("fair", "fifo"):
        for tenant, tier in (("gold", "premium"), ("silver", "standard"), ("bronze", "batch")):
            def m(key: str, tenant: str = tenant, name: str = name) -> float:
                return median([run[name][tenant][key] for run in runs])
            lines.append(f"| {name} | {tier} | {m('offered'):.0f} | {m('completed'):.0f} | {m('attainment'):.1%} "
                         f"| {m('ttft_p99_s'):.2f} | {runs[-1][name][tenant]['rejected'] or '-'} |")
    return lines


@app.command()
def main(
    repeats: Annotated[int, typer.Option(min=1, max=10)] = 3,
    noisy_s: Annotated[float, typer.Option(help="seconds of traffic per noisy-neighbour phase")] = 20,
    overload_s: Annotated[float, typer.Option(help="seconds of offered overload per policy")] = 20,
    fair_url: Annotated[str | None, typer.Option()] = None,
    fifo_url: Annotated[str | None, typer.Option()] = None,
    base_port: Annotated[int, typer.Option()] = 38400,
) -> None:
    stack = None
    if fair_url is None or fifo_url is None:
        stack = TwoPoolStack(Path(tempfile.mkdtemp(prefix="shunter-tenancy-")), Ports.from_base(base_port))
        stack.start()
        fair_url, fifo_url = stack.fair_url, stack.fifo_url
    try:
        noisy_runs, overload_runs = [], []
        for repeat in range(repeats):
            print(f"[tenancy] repeat {repeat + 1}/{repeats}", file=sys.stderr, flush=True)
            noisy_runs.append(run_noisy(fair_url, fifo_url, noisy_s))
            overload_runs.append(run_overload(fair_url, fifo_url, overload_s))
    finally:
        if stack is not None:
            stack.stop()
    BENCH_RESULTS.mkdir(parents=True, exist_ok=True)
    command = command_line()
    (BENCH_RESULTS / "tenancy.json").write_text(json.dumps(
        {"command": command, "noisy": noisy_runs, "overload": overload_runs}, indent=1, default=str))
    print("\n".join([f"`{command}` ({repeats} repeats, medians)", "", *_noisy_table(noisy_runs), "",
                     *_overload_table(overload_runs)]))
