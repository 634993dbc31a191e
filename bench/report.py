"""The suite's summaries (medians over repeats) and its Markdown report.

``summarize_cell`` turns the per-repeat ``RunResult`` lists of one (model, clients) cell into the
medians, the gateway/direct throughput ratio and the gateway's added median latency.
``summarize_chat`` pools every generation of one (path, streams) cell over its repeats and takes
medians. Batched cells also carry CPU per request and Triton's batch shape. ``markdown`` renders
the report (``bench.record.machine_facts`` gives its machine).
"""

from __future__ import annotations

import math
from typing import Any

from bench.chat import ChatRun
from bench.load import RunResult, median


def summarize_cell(gateway: list[RunResult], direct: list[RunResult]) -> dict[str, Any]:
    """Medians per path, ``ratio`` = gw req/s / direct req/s, ``added_p50_ms`` = gw p50 - direct p50."""
    summary: dict[str, Any] = {}
    for path, runs in (("gateway", gateway), ("direct", direct)):
        summary[path] = {
            "rps": median([r.rps for r in runs]), "p50_ms": median([r.p50_ms for r in runs]),
            "p99_ms": median([r.p99_ms for r in runs]), "errors": sum(r.errors for r in runs),
            "requests": sum(r.requests for r in runs),
            "cpu_ms_per_request": {
                name: median([r.cpu_ms_per_request[name] for r in runs if name in r.cpu_ms_per_request])
                for name in ("gateway", "triton", "load_generator")},
            "triton_batching": {
                name: median([r.triton_batching[name] for r in runs if name in r.triton_batching])
                for name in ("rows_per_request", "rows_per_execution")},
        }
    gw, di = summary["gateway"], summary["direct"]
    summary["ratio"] = gw["rps"] / di["rps"] if di["rps"] else math.nan
    summary["added_p50_ms"] = gw["p50_ms"] - di["p50_ms"]
    return summary


def summarize_chat(runs: list[ChatRun]) -> dict[str, Any]:
    """Medians over every generation of every repeat, plus aggregate tokens/s per repeat."""
    timings = [t for run in runs for t in run.timings]
    aggregate = [sum(t.completion_tokens for t in run.timings) / run.wall_s for run in runs if run.wall_s]
    return {
        "generations": len(timings), "errors": sum(r.errors for r in runs),
        "ttft_p50_ms": median([t.ttft_ms for t in timings]),
        "itl_p50_ms": median([t.itl_ms for t in timings]),
        "tokens_per_s_per_stream": median([t.tokens_per_s for t in timings]),
        "completion_tokens_p50": median([float(t.completion_tokens) for t in timings]),
        "aggregate_tokens_per_s": median(aggregate),
    }


def _num(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _with_errors(text: str, errors: int) -> str:
    return f"{text} ({errors} err)" if errors else text


def _batched_table(cells: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | clients | gw req/s | direct req/s | ratio | gw p50 ms | direct p50 ms | "
             "added p50 ms | gw p99 ms | direct p99 ms |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cell in cells:
        s = cell["summary"]
        gw, di = s["gateway"], s["direct"]
        lines.append(
            f"| {cell['model']} | {cell['clients']} | {_with_errors(_num(gw['rps']), gw['errors'])} | "
            f"{_with_errors(_num(di['rps']), di['errors'])} | {_num(s['ratio'], 2)} | {_num(gw['p50_ms'])} | "
            f"{_num(di['p50_ms'])} | {_num(s['added_p50_ms'])} | {_num(gw['p99_ms'])} | {_num(di['p99_ms'])} |")
    return lines


def _cpu_table(cells: list[dict[str, Any]]) -> list[str]:
    """CPU ms per request by component and path (only when the harness started the stack)."""
    lines = ["| model | clients | gw path: gateway CPU ms/req | gw path: Triton CPU ms/req | "
             "gw path: load generator CPU ms/req | direct path: Triton CPU ms/req | "
             "direct path: load generator CPU ms/req | Triton rows per request gw / direct | "
             "Triton rows per execution gw / direct |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cell in cells:
        gw = cell["summary"]["gateway"].get("cpu_ms_per_request", {})
        di = cell["summary"]["direct"].get("cpu_ms_per_request", {})
        gw_rows = cell["summary"]["gateway"].get("triton_batching", {})
        di_rows = cell["summary"]["direct"].get("triton_batching", {})
        lines.append(f"| {cell['model']} | {cell['clients']} | {_num(gw.get('gateway', math.nan), 2)} | "
                     f"{_num(gw.get('triton', math.nan), 2)} | {_num(gw.get('load_generator', math.nan), 2)} | "
                     f"{_num(di.get('triton', math.nan), 2)} | {_num(di.get('load_generator', math.nan), 2)} | "
                     f"{_pair(gw_rows, di_rows, 'rows_per_request')} | "
                     f"{_pair(gw_rows, di_rows, 'rows_per_execution')} |")
    return lines


def _pair(gateway: dict[str, float], direct: dict[str, float], name: str) -> str:
    return f"{_num(gateway.get(name, math.nan))} / {_num(direct.get(name, math.nan))}"


def _chat_table(cells: list[dict[str, Any]]) -> list[str]:
    lines = ["| path | streams | TTFT p50 ms | ITL p50 ms | tok/s per stream | generations | aggregate tok/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for cell in cells:
        s = cell["summary"]
        lines.append(
            f"| {cell['path']} | {cell['streams']} | {_num(s['ttft_p50_ms'])} | {_num(s['itl_p50_ms'])} | "
            f"{_num(s['tokens_per_s_per_stream'])} | "
            f"{'skipped' if s.get('skipped') else _with_errors(str(s['generations']), s['errors'])} | "
            f"{_num(s['aggregate_tokens_per_s'])} |")
    return lines


def markdown(result: dict[str, Any]) -> str:
    """The report: command, date, machine, settings, then the two tables and the error samples."""
    m, settings, endpoints = result["machine"], result["settings"], result.get("endpoints", {})
    lines = [
        "```", result["command"], "```", "",
        f"- Date: {result['date']}",
        f"- Machine: nproc {m['nproc']}, CPU {m['cpu_model']}, {m['memory_gib']} GiB RAM, "
        f"Linux {m['kernel']}, Python {m['python']}; load average (1/5/15 min) at start {m['loadavg']}, "
        f"at end {result.get('loadavg_end', 'n/a')}",
        f"- Stack: {'started by the harness' if endpoints.get('started_here') else 'already running'};"
        f" gateway {endpoints.get('gateway_url')}, Triton gRPC {endpoints.get('triton_grpc')}",
        f"- Settings: {settings['repeats']} repeats x {settings['duration_s']} s per cell (+{settings['warmup_s']} s "
        f"warm-up), gateway and direct interleaved; medians over repeats; think time {settings['think_ms']} ms "
        f"between an answer and the client's next request. {_placement(result.get('pinning'))}",
    ]
    if result.get("partial", True):
        lines += ["", "**Partial results: the run did not finish.**"]
    if result["batched"]:
        lines += ["", "## Batched models (closed loop)", "", *_batched_table(result["batched"])]
        lines += ["", "### CPU per request (whole run incl. warm-up; medians over repeats)", "",
                  *_cpu_table(result["batched"])]
    if result["chat"]:
        lines += ["", f"## Chat (streaming, max_tokens {settings['chat_max_tokens']}, temperature 0)", "",
                  *_chat_table(result["chat"])]
    samples = _error_samples(result)
    if samples:
        lines += ["", "## Errors (samples)", "", *[f"- {s}" for s in samples]]
    return "\n".join(lines) + "\n"


def _placement(pinning: dict[str, Any] | None) -> str:
    if not pinning:
        return "The load generator, the gateway and Triton share the same CPUs."
    return (f"Pinned: Triton and its stubs on CPUs {pinning['triton_cpus']}, the gateway and the load generator "
            f"on CPUs {pinning['other_cpus']} (as if Triton had a host of its own).")


def _error_samples(result: dict[str, Any]) -> list[str]:
    samples = []
    for cell in result["batched"]:
        for path in ("gateway", "direct"):
            for run in cell["runs"][path]:
                samples += [f"{cell['model']} x{cell['clients']} {path}: {e}" for e in run["error_samples"]]
    for cell in result["chat"]:
        if cell["summary"].get("skipped"):
            samples.append(f"chat x{cell['streams']} {cell['path']}: skipped, {cell['summary']['skipped']}")
        for run in cell["runs"]:
            samples += [f"chat x{cell['streams']} {cell['path']}: {e}" for e in run["error_samples"]]
    return list(dict.fromkeys(samples))[:20]
