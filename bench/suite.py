"""The suite (``make bench``): the gateway against direct Triton, side by side, per model.

``python -m bench suite --out bench/results/latest.json --markdown bench/results/latest.md
[--repeats 3] [--duration-s 8] [--models embed,rerank,vision,tabular,chat] [--page docs/benchmarks.md]``

For each batched model and each client count, gateway and direct runs alternate (gw, direct,
gw, direct, ...) ``--repeats`` times each; chat does the same per stream count. Both reports are
rewritten after every cell (marked ``partial`` until the end), so an interrupted run keeps what
it measured. By default a private stack is started on the bench ports and always stopped
afterwards; with ``--use-running-stack`` the given URLs are measured instead. With ``--page``, a
finished run also rewrites that page's generated block (``bench.figures``) and nothing else of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.chat import ChatRun, DirectChat, GatewayChat, StreamTiming, run_streams
from bench.clients import BATCHED_MODELS, DirectClient, GatewayClient, gateway_http
from bench.cpu import component_seconds, pin_tree
from bench.figures import MissingBlock, has_block, write_block
from bench.harness import BENCH_RESULTS, Endpoints, StackOptions, bench_stack
from bench.load import RunResult, closed_loop
from bench.record import command_line, int_list, log, machine_facts
from bench.report import markdown, summarize_cell, summarize_chat
from bench.triton_stats import batch_shape, triton_counts
from bench.workload import CHAT_MAX_TOKENS, Workload

app = typer.Typer(add_completion=False)
ALL_MODELS = (*BATCHED_MODELS, "chat")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to measure and for how long."""

    models: list[str]
    clients: list[int]
    chat_streams: list[int]
    repeats: int
    duration_s: float
    warmup_s: float
    think_ms: float
    api_key: str
    chat_max_tokens: int = CHAT_MAX_TOKENS


@dataclasses.dataclass
class Report:
    """The result document and where it goes; ``save()`` rewrites both files."""

    result: dict[str, Any]
    out: Path
    markdown_path: Path

    def save(self, partial: bool = True) -> None:
        self.result["partial"] = partial
        self.result["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(_clean(self.result), indent=1) + "\n")
        self.markdown_path.parent.mkdir(parents=True, exist_ok=True)
        self.markdown_path.write_text(markdown(self.result))


async def measure_batched(endpoints: Endpoints, settings: Settings, workload: Workload, report: Report) -> None:
    """Every (model, clients) cell, gateway and direct interleaved; appended to ``report``."""
    gateway = GatewayClient(endpoints.gateway_url, settings.api_key, workload,
                            max_connections=max(64, *settings.clients))
    direct = DirectClient(endpoints.triton_grpc, workload)
    try:
        for model in [m for m in settings.models if m in BATCHED_MODELS]:
            for count in settings.clients:
                runs: dict[str, list[RunResult]] = {"gateway": [], "direct": []}
                for repeat in range(settings.repeats):
                    for path, client in (("gateway", gateway), ("direct", direct)):
                        before = _cpu_seconds(endpoints)
                        counts_before = await triton_counts(endpoints.triton_http, model)
                        result = await closed_loop(client.sender(model), count, settings.duration_s,
                                                   settings.warmup_s, think_s=settings.think_ms / 1000.0)
                        result.cpu_ms_per_request = _cpu_ms_per_request(endpoints, before, result)
                        result.triton_batching = batch_shape(counts_before,
                                                             await triton_counts(endpoints.triton_http, model))
                        runs[path].append(result)
                        log(f"{model} x{count} {path} #{repeat + 1}: {result.rps:.1f} req/s, "
                            f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.errors} errors")
                report.result["batched"].append({
                    "model": model, "clients": count,
                    "runs": {p: [r.to_json() for r in rs] for p, rs in runs.items()},
                    "summary": summarize_cell(runs["gateway"], runs["direct"])})
                report.save()
    finally:
        await gateway.aclose()
        await direct.aclose()


def _cpu_seconds(endpoints: Endpoints) -> dict[str, float]:
    return component_seconds(endpoints.gateway_pid, endpoints.triton_pid)


def _cpu_ms_per_request(endpoints: Endpoints, before: dict[str, float], result: RunResult) -> dict[str, float]:
    """CPU ms per request of each component over the whole run (warm-up included in both the CPU
    and the request count, so the ratio stays a per-request cost)."""
    after = _cpu_seconds(endpoints)
    handled = result.requests_total or 1
    return {name: 1000.0 * (after[name] - before[name]) / handled for name in before if name in after}


async def _warm_up(paths: dict[str, Callable[[], Awaitable[StreamTiming]]]) -> dict[str, str]:
    """One generation per path (two tries); the paths that failed both, with the last error."""
    failed: dict[str, str] = {}
    for path, stream in paths.items():
        for _ in range(2):
            warm = await run_streams(stream, 1, 0.0)
            log(f"chat warm-up {path}: {len(warm.timings)} ok, {warm.errors} errors {warm.error_samples}")
            if warm.timings:
                failed.pop(path, None)
                break
            failed[path] = warm.error_samples[-1] if warm.error_samples else "failed"
    return failed


async def measure_chat(endpoints: Endpoints, settings: Settings, report: Report) -> None:
    """Every (streams, path) cell, interleaved per repeat; a path whose warm-up failed is skipped."""
    http = gateway_http(endpoints.gateway_url, settings.api_key, timeout_s=120.0)
    direct = DirectChat(endpoints.triton_grpc)
    paths: dict[str, Callable[[], Awaitable[StreamTiming]]] = {
        "gateway": GatewayChat(http).stream, "direct": direct.stream}
    try:
        failed = await _warm_up(paths)
        for count in settings.chat_streams:
            runs: dict[str, list[ChatRun]] = {p: [] for p in paths}
            for repeat in range(settings.repeats):
                for path, stream in paths.items():
                    if path in failed:
                        continue
                    run = await run_streams(stream, count, settings.duration_s)
                    runs[path].append(run)
                    log(f"chat x{count} {path} #{repeat + 1}: {len(run.timings)} generations, "
                        f"{run.errors} errors")
            for path, path_runs in runs.items():
                summary = summarize_chat(path_runs)
                if path in failed:
                    summary["skipped"] = f"warm-up failed: {failed[path]}"
                report.result["chat"].append({"path": path, "streams": count, "summary": summary,
                                              "runs": [r.to_json() for r in path_runs]})
            report.save()
    finally:
        await http.aclose()
        await direct.aclose()


async def measure(endpoints: Endpoints, settings: Settings, report: Report) -> None:
    """The batched cells, then the chat cells, of the chosen models."""
    if any(m in BATCHED_MODELS for m in settings.models):
        await measure_batched(endpoints, settings, Workload.build(), report)
    if "chat" in settings.models:
        await measure_chat(endpoints, settings, report)


def _clean(value: Any) -> Any:
    """NaN/inf become null so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


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
    pin: Annotated[bool, Opt(help="Pin Triton to the last CPU and the gateway and this load generator to "
                                  "the others, as if Triton had a host of its own (needs >= 2 CPUs).")] = False,
    page: Annotated[Path | None, Opt(exists=True, dir_okay=False, help=(
        "When the run finishes, rewrite this page's generated block (bench.figures) with the report; "
        "nothing else of the page."))] = None,
) -> None:
    """Gateway vs direct Triton, side by side; see the module docstring."""
    chosen = [m.strip() for m in models.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(ALL_MODELS))
    if unknown:
        raise typer.BadParameter(f"unknown models {unknown}; choose from {list(ALL_MODELS)}")
    settings = Settings(chosen, int_list(clients), int_list(chat_streams), repeats, duration_s, warmup_s,
                        think_ms, api_key)
    if page is not None and not has_block(page.read_text()):
        log(f"{page} has no generated block (bench.figures markers): it will not be rewritten")
    started = dt.datetime.now(dt.UTC)
    options = StackOptions(use_running=use_running_stack, gateway_url=gateway_url.rstrip("/"),
                           triton_grpc=triton_grpc, triton_http=triton_http)
    report = Report({"command": command_line(), "date": started.isoformat(timespec="seconds"),
                     "machine": machine_facts(), "settings": _public(settings), "batched": [], "chat": []},
                    out, markdown_path)
    with bench_stack(options, log=lambda m: log(str(m))) as endpoints:
        report.result["endpoints"] = dataclasses.asdict(endpoints)
        if pin:
            report.result["pinning"] = pin_components(endpoints)
        log(f"measuring {chosen} against {endpoints}")
        asyncio.run(measure(endpoints, settings, report))
    report.result["elapsed_s"] = round(time.time() - started.timestamp(), 1)
    report.save(partial=False)
    log(f"wrote {out} and {markdown_path}")
    if page is not None:
        try:
            write_block(page, markdown(report.result))
            log(f"rewrote the generated block of {page}")
        except MissingBlock:
            log(f"{page} has no generated block: not rewritten")


def pin_components(endpoints: Endpoints) -> dict[str, Any]:
    """Triton (and its stubs) on the last CPU; the gateway and the load generator on the rest."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or endpoints.triton_pid is None or endpoints.gateway_pid is None:
        raise typer.BadParameter("--pin needs at least 2 CPUs and a stack started by the harness")
    triton_cpus, rest = {cpus[-1]}, set(cpus[:-1])
    # The stack's processes are children of this one: pin this process's own threads only.
    threads = {"triton": pin_tree(endpoints.triton_pid, triton_cpus),
               "gateway": pin_tree(endpoints.gateway_pid, rest),
               "load_generator": pin_tree(os.getpid(), rest, descendants=False)}
    log(f"pinned Triton to CPUs {sorted(triton_cpus)}, gateway and load generator to {sorted(rest)}: {threads}")
    return {"triton_cpus": sorted(triton_cpus), "other_cpus": sorted(rest), "threads": threads}


def _public(settings: Settings) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(settings).items() if k != "api_key"}
