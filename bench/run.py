"""CLI: measure the gateway against direct Triton and write a JSON and a Markdown report.

``python -m bench.run --out bench/results/latest.json --markdown bench/results/latest.md
[--repeats 3] [--duration-s 8] [--models embed,rerank,vision,tabular,chat]``

For each batched model and each client count, gateway and direct runs alternate (gw, direct,
gw, direct, ...) ``--repeats`` times each; chat does the same per stream count. By default a
private stack is started on the bench ports and always stopped afterwards; with
``--use-running-stack`` the given URLs are measured instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.chat import ChatRun, DirectChat, GatewayChat, StreamTiming, run_streams
from bench.clients import BATCHED_MODELS, DirectClient, GatewayClient, gateway_http
from bench.load import RunResult, closed_loop
from bench.report import machine_facts, markdown, summarize_cell, summarize_chat
from bench.stack import BENCH_RESULTS, Endpoints, StackOptions, bench_stack
from bench.workload import CHAT_MAX_TOKENS, Workload

app = typer.Typer(add_completion=False)
ALL_MODELS = (*BATCHED_MODELS, "chat")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


async def measure_batched(endpoints: Endpoints, api_key: str, workload: Workload, models: list[str],
                          clients: list[int], repeats: int, duration_s: float,
                          warmup_s: float, think_s: float) -> list[dict[str, Any]]:
    """Every (model, clients) cell, gateway and direct interleaved ``repeats`` times."""
    gateway = GatewayClient(endpoints.gateway_url, api_key, workload, max_connections=max(64, *clients))
    direct = DirectClient(endpoints.triton_grpc, workload)
    cells = []
    try:
        for model in models:
            for count in clients:
                runs: dict[str, list[RunResult]] = {"gateway": [], "direct": []}
                for repeat in range(repeats):
                    for path, client in (("gateway", gateway), ("direct", direct)):
                        result = await closed_loop(client.sender(model), count, duration_s, warmup_s,
                                                   think_s=think_s)
                        runs[path].append(result)
                        log(f"{model} x{count} {path} #{repeat + 1}: {result.rps:.1f} req/s, "
                            f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.errors} errors")
                cells.append({"model": model, "clients": count,
                              "runs": {p: [r.to_json() for r in rs] for p, rs in runs.items()},
                              "summary": summarize_cell(runs["gateway"], runs["direct"])})
    finally:
        await gateway.aclose()
        await direct.aclose()
    return cells


async def measure_chat(endpoints: Endpoints, api_key: str, streams: list[int], repeats: int,
                       duration_s: float) -> list[dict[str, Any]]:
    """Every (path, streams) cell; one warm-up generation per path first."""
    http = gateway_http(endpoints.gateway_url, api_key, timeout_s=120.0)
    direct = DirectChat(endpoints.triton_grpc)
    paths: dict[str, Callable[[], Awaitable[StreamTiming]]] = {
        "gateway": GatewayChat(http).stream, "direct": direct.stream}
    runs: dict[tuple[str, int], list[ChatRun]] = {(p, s): [] for s in streams for p in paths}
    try:
        for path, stream in paths.items():
            warm = await run_streams(stream, 1, 0.0)
            log(f"chat warm-up {path}: {len(warm.timings)} ok, {warm.errors} errors {warm.error_samples}")
        for count in streams:
            for repeat in range(repeats):
                for path, stream in paths.items():
                    run = await run_streams(stream, count, duration_s)
                    runs[(path, count)].append(run)
                    log(f"chat x{count} {path} #{repeat + 1}: {len(run.timings)} generations, "
                        f"{run.errors} errors")
    finally:
        await http.aclose()
        await direct.aclose()
    return [{"path": p, "streams": s, "runs": [r.to_json() for r in rs], "summary": summarize_chat(rs)}
            for (p, s), rs in sorted(runs.items(), key=lambda item: (item[0][1], item[0][0] != "gateway"))]


def _clean(value: Any) -> Any:
    """NaN/inf become null so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def command_line() -> str:
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else sys.executable
    return shlex.join([python, "-m", "bench.run", *sys.argv[1:]])


async def measure(endpoints: Endpoints, api_key: str, models: list[str], clients: list[int],
                  streams: list[int], repeats: int, duration_s: float, warmup_s: float,
                  think_s: float) -> dict[str, Any]:
    """The batched cells, then the chat cells, of the chosen models."""
    workload = Workload.build()
    batched = [m for m in models if m in BATCHED_MODELS]
    result: dict[str, Any] = {"batched": [], "chat": []}
    if batched:
        result["batched"] = await measure_batched(endpoints, api_key, workload, batched, clients,
                                                  repeats, duration_s, warmup_s, think_s)
    if "chat" in models:
        result["chat"] = await measure_chat(endpoints, api_key, streams, repeats, duration_s)
    return result


Opt = typer.Option


@app.command()
def main(
    out: Annotated[Path, Opt(help="JSON report (raw runs + medians).")] = BENCH_RESULTS / "latest.json",
    markdown_path: Annotated[Path, Opt("--markdown", help="Markdown report.")] = BENCH_RESULTS / "latest.md",
    repeats: Annotated[int, Opt(min=1, help="Runs per path per cell (gateway, direct alternate).")] = 3,
    duration_s: Annotated[float, Opt(min=0.5, help="Measured seconds per run.")] = 8.0,
    warmup_s: Annotated[float, Opt(min=0.0, help="Warm-up seconds before each measured run.")] = 1.0,
    think_ms: Annotated[float, Opt(min=0.0, help="Pause between an answer and a client's next request.")] = 0.0,
    models: Annotated[str, Opt(help="Comma-separated subset of the models.")] = ",".join(ALL_MODELS),
    clients: Annotated[str, Opt(help="Closed-loop client counts for the batched models.")] = "1,4,16",
    chat_streams: Annotated[str, Opt(help="Concurrent stream counts for chat.")] = "1,4",
    api_key: Annotated[str, Opt(help="Gateway tenant key.")] = "demo-premium-key",
    use_running_stack: Annotated[bool, Opt(help="Measure an already running stack; start none.")] = False,
    gateway_url: Annotated[str, Opt(help="With --use-running-stack.")] = StackOptions.gateway_url,
    triton_grpc: Annotated[str, Opt(help="With --use-running-stack.")] = StackOptions.triton_grpc,
    triton_http: Annotated[str, Opt(help="With --use-running-stack.")] = StackOptions.triton_http,
) -> None:
    """Gateway vs direct Triton, side by side; see the module docstring."""
    chosen = [m.strip() for m in models.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(ALL_MODELS))
    if unknown:
        raise typer.BadParameter(f"unknown models {unknown}; choose from {list(ALL_MODELS)}")
    command, started, machine = command_line(), dt.datetime.now(dt.UTC), machine_facts()
    options = StackOptions(use_running=use_running_stack, gateway_url=gateway_url.rstrip("/"),
                           triton_grpc=triton_grpc, triton_http=triton_http)
    with bench_stack(options, log=lambda m: log(str(m))) as endpoints:
        log(f"measuring {chosen} against {endpoints}")
        measured = asyncio.run(measure(endpoints, api_key, chosen, _ints(clients), _ints(chat_streams),
                                       repeats, duration_s, warmup_s, think_ms / 1000.0))
    result = {
        "command": command, "date": started.isoformat(timespec="seconds"), "machine": machine,
        "endpoints": dataclasses.asdict(endpoints), "elapsed_s": round(time.time() - started.timestamp(), 1),
        "settings": {"repeats": repeats, "duration_s": duration_s, "warmup_s": warmup_s, "think_ms": think_ms,
                     "models": chosen,
                     "clients": _ints(clients), "chat_streams": _ints(chat_streams),
                     "chat_max_tokens": CHAT_MAX_TOKENS},
        **measured,
    }
    result["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    write_reports(result, out, markdown_path)


def write_reports(result: dict[str, Any], out: Path, markdown_path: Path) -> None:
    """The JSON (NaN as null) and the Markdown report, creating their folders."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(_clean(result), indent=1) + "\n")
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(markdown(result))
    log(f"wrote {out} and {markdown_path}")


if __name__ == "__main__":
    app()
