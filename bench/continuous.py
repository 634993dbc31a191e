"""Continuous batching of ``chat`` through the gateway against the engine's own ceiling.

``python -m bench continuous [--repeats 3] [--duration-s 8] [--streams 1,4,8,16] --out FILE``

Starts a private stack (bench ports, temporary state and repository; the built artifacts are
linked), then per repeat: for each stream count N, N closed-loop clients stream the benchmark
chat request (greedy, ``max_tokens`` 64) through the gateway; after ``warmup_s``, the text chunks
that arrive within the next ``duration_s`` are counted, whichever generation they belong to
(aggregate = those chunks x completion tokens per chunk of the generations that ended in the window,
/ ``duration_s``; TTFT and ITL percentiles over those generations), then the clients are
cancelled. Counting whole generations instead would count closed-loop streams that finish together
in waves: one wave more or less in a window moved a figure by up to a third. Each run also
records where the clients' cycles went (``cycle_figures``: the token-weighted mean inter-chunk
gap, each generation's tail past its last chunk and the client's turnaround, and per generation
who streamed alongside it and whose prefill fell inside it, which ``bench.studies.served_cost`` reads),
others' share of the cores over the window and the mean wait of a chat request in Triton's own
queue (``window_meter``; with Triton's dynamic batcher on the decoupled chat model that wait was
20-190 ms per request at 4-16 streams, docs/benchmarks.md). Then the
engine ceiling (``bench.ceiling``: the same engine, same prompt, N sequences in one batch, no
Triton, in a subprocess). Afterwards: the TTFT of a short request on an idle stack, and while 8
long generations stream. Writes raw runs and medians to ``--out`` (JSON) and prints Markdown rows.
Run it under ``flock /tmp/shunter-integration.lock`` on a shared host.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.chat import GatewayChat, StreamTiming, run_streams
from bench.clients import gateway_http
from bench.contention import CpuWatch
from bench.cpu import EngineIsolation, component_seconds, isolation_entry, renice_tree
from bench.harness import BENCH_RESULTS, IsolateEngine, bench_stack, isolation_if, private_stack_options
from bench.record import command_line, log, machine_facts
from bench.triton_stats import engine_busy, engine_counters, queue_wait, triton_counts

app = typer.Typer(add_completion=False)
YIELD_NICE = 10
LONG_USER = "Write a very long, detailed story about a lighthouse keeper and a storm."
SHORT_USER = "What is 2+2?"


def _pct(values: list[float], q: float) -> float:
    clean = sorted(v for v in values if v == v)
    if not clean:
        return float("nan")
    return clean[min(len(clean) - 1, round(q * (len(clean) - 1)))]


CpuSnapshot = Callable[[], dict[str, float]]
WindowMeter = Callable[[], Awaitable[Callable[[], Awaitable[dict[str, float]]]]]  # await start() -> stop


@dataclass
class Cycle:
    """One generation of one closed-loop client: when it was sent, when ``stream()`` returned
    (NaN when it was cut off) and when each of its text chunks arrived (``time.perf_counter``)."""

    client: int
    started: float
    chunks: list[float] = field(default_factory=list)
    ended: float = math.nan
    timing: StreamTiming | None = None


async def closed_loop(chat: GatewayChat, streams: int, warmup_s: float, duration_s: float,
                      cpu: CpuSnapshot | None = None, meter: WindowMeter | None = None) -> dict[str, Any]:
    """``streams`` clients stream back to back; see the module docstring for what is counted.
    With ``cpu``, each component's CPU milliseconds per completion token counted in the window;
    with ``meter``, its figures over the window (merged into the result)."""
    cycles: list[Cycle] = []
    arrivals: list[float] = []
    errors: list[str] = []

    async def client(number: int) -> None:
        # A deadline as well as the cancel below: Python 3.11's asyncio.wait_for (used for the idle
        # timeout) can swallow a cancellation that races with an arriving chunk.
        while time.perf_counter() < stop_at:
            cycle = Cycle(number, time.perf_counter())
            cycles.append(cycle)
            try:
                cycle.timing = await chat.stream(cycle.chunks)
                cycle.ended = time.perf_counter()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # counted; the client goes on
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            finally:
                arrivals.extend(cycle.chunks)

    started = time.perf_counter()
    stop_at = started + warmup_s + duration_s
    tasks = [asyncio.create_task(client(n)) for n in range(streams)]
    await asyncio.sleep(warmup_s)
    cpu_before = cpu() if cpu is not None else {}
    stop_meter = await meter() if meter is not None else None
    await asyncio.sleep(duration_s)
    cpu_after = cpu() if cpu is not None else {}
    metered = await stop_meter() if stop_meter is not None else {}
    for task in tasks:
        task.cancel()
    _, pending = await asyncio.wait(tasks, timeout=120.0)  # a swallowed cancel ends at its stream's end
    if pending:
        raise RuntimeError(f"{len(pending)} clients did not stop")
    window_start, window_end = started + warmup_s, started + warmup_s + duration_s
    window = [c for c in cycles if c.timing is not None and window_start <= c.ended <= window_end]
    chunks = sum(1 for at in arrivals if window_start <= at <= window_end)
    timings = [c.timing for c in window if c.timing is not None]
    tokens_per_chunk = sum(t.completion_tokens for t in timings) / max(1, sum(t.chunks for t in timings))
    tokens = chunks * (tokens_per_chunk if window else 1.0)
    cpu_ms = {name: round((cpu_after[name] - cpu_before[name]) * 1000.0 / tokens, 3)
              for name in cpu_after if name in cpu_before and tokens}
    return {"generations": len(window), "errors": len(errors), "error_samples": errors[:3],
            "cpu_ms_per_token": cpu_ms, "window_chunks": chunks, "tokens_per_chunk": tokens_per_chunk,
            "aggregate_tokens_per_s": tokens / duration_s,
            "completion_tokens_p50": statistics.median([t.completion_tokens for t in timings]) if window else 0,
            "ttft_ms": [t.ttft_ms for t in timings], "itl_ms": [t.itl_ms for t in timings],
            **cycle_figures(cycles, window), **metered}


def cycle_figures(cycles: list[Cycle], window: list[Cycle]) -> dict[str, Any]:
    """Where each closed-loop cycle of the ``window`` generations went: the token-weighted mean
    inter-chunk gap (all their first-to-last spans over all their gaps: what a rate sees, unlike a
    median of per-generation means), and per generation the tail (last text chunk to the end of
    the stream: the end-of-generation step, the final response, usage and ``[DONE]``) and the
    client's turnaround (its end to the same client's next send). Milliseconds."""
    spans = [(c.chunks[-1] - c.chunks[0], len(c.chunks) - 1) for c in window if len(c.chunks) > 1]
    gaps = sum(n for _, n in spans)
    following: dict[int, Cycle] = {}  # id(cycle) -> the same client's next cycle
    by_client: dict[int, list[Cycle]] = {}
    for cycle in cycles:
        by_client.setdefault(cycle.client, []).append(cycle)
    for own in by_client.values():
        following.update({id(a): b for a, b in itertools.pairwise(own)})
    return {"itl_token_mean_ms": sum(s for s, _ in spans) * 1000.0 / gaps if gaps else math.nan,
            "tail_ms": [(c.ended - c.chunks[-1]) * 1000.0 for c in window if c.chunks],
            "turnaround_ms": [(following[id(c)].started - c.ended) * 1000.0 for c in window if id(c) in following],
            "spans": streaming_spans(cycles, window)}


def streaming_spans(cycles: list[Cycle], window: list[Cycle]) -> list[list[float]]:
    """Per ``window`` generation with two text chunks or more: ``[span_s, gaps, decoding_mean,
    prefills_in_span]``: its first-to-last chunk span, its chunk gaps, the time-weighted mean number
    of generations streaming meanwhile (itself included; a generation streams from its first chunk
    to its last) and how many other generations got their first chunk inside the span (each is a
    prefill step the engine ran between two of its tokens). What ``bench.studies.served_cost`` reads."""
    streams = [(c.chunks[0], c.chunks[-1]) for c in cycles if c.chunks]
    rows = []
    for cycle in window:
        if len(cycle.chunks) < 2:
            continue
        first, last = cycle.chunks[0], cycle.chunks[-1]
        span = last - first
        overlap = sum(max(0.0, min(last, b) - max(first, a)) for a, b in streams)  # itself included
        prefills = sum(1 for a, _ in streams if first < a < last)
        rows.append([span, float(len(cycle.chunks) - 1), overlap / span if span > 0 else 1.0, float(prefills)])
    return rows


def window_meter(triton_http: str, own_pids: list[int], triton_metrics: str | None = None) -> WindowMeter:
    """Over a window: others' share of the cores (``bench.contention``), the mean time a chat
    request waited in Triton's own queue before the model's ``execute`` got it, and what the chat
    engine's step counters say of it (``engine_window``)."""
    async def start() -> Callable[[], Awaitable[dict[str, float]]]:
        watch, before = CpuWatch(own_pids), await triton_counts(triton_http, "chat")
        counters_before = await engine_counters(triton_metrics) if triton_metrics else None
        started = time.perf_counter()

        async def stop() -> dict[str, float]:
            figures = {"others_share": round(watch.stop()["others_share"], 4)}
            waited = queue_wait(before, await triton_counts(triton_http, "chat"))
            if waited is not None:
                figures["triton_queue_ms_per_request"] = waited["mean_wait_ms"]
            grown = engine_busy(counters_before, await engine_counters(triton_metrics) if triton_metrics else None)
            if grown is not None:
                figures.update(engine_window(grown, time.perf_counter() - started))
            return figures
        return stop
    return start


ENGINE_WINDOW_KEYS = ("engine_busy_share", "engine_steps_per_s", "engine_step_ms",
                      "engine_prefill_tokens_per_step", "engine_decode_tokens_per_step",
                      "engine_attention_positions_per_step")


def engine_window(grown: dict[str, float], window_s: float) -> dict[str, float]:
    """The engine's side of a window from what its counters grew by: the share of the window it
    spent in steps, its steps per second, the mean step (ms), and the prompt and decode tokens per
    step (the latter is the mean number of sequences decoding) and the KV positions attended per
    step (how long those sequences' contexts were)."""
    steps = grown["steps"]
    per_step = (lambda key: round(grown[key] / steps, 2)) if steps else (lambda key: 0.0)
    return {"engine_busy_share": round(grown["step_s"] / window_s, 4) if window_s > 0 else 0.0,
            "engine_steps_per_s": round(steps / window_s, 2) if window_s > 0 else 0.0,
            "engine_step_ms": round(1000.0 * grown["step_s"] / steps, 2) if steps else 0.0,
            "engine_prefill_tokens_per_step": per_step("prefill_tokens"),
            "engine_decode_tokens_per_step": per_step("decode_tokens"),
            "engine_attention_positions_per_step": per_step("attention_positions")}


def _ceiling(streams: list[int], isolation: EngineIsolation | None) -> list[dict[str, float]]:
    """The engine ceiling for every stream count, in a fresh process (bounded: 10 minutes), with
    the engine isolated as the served one is."""
    done = subprocess.run([sys.executable, "-m", "bench", "ceiling", "--streams", ",".join(map(str, streams)),
                           *(isolation.engine_args() if isolation is not None else [])],
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def short_users(new_questions: bool, times: int, offset: int = 0) -> list[str]:
    """The short requests' user messages: the same one each time, or a new question each time
    (same system prompt, so only the question itself misses the engine's prefix reuse)."""
    if not new_questions:
        return [SHORT_USER] * times
    return [f"What is {offset + k} plus {offset + k}?" for k in range(times)]


async def _ttft(http: Any, users: list[str]) -> list[float]:
    return [(await GatewayChat(http, idle_timeout_s=60.0, user=u, max_tokens=8).stream()).ttft_ms for u in users]


async def _ttft_under_load(url: str, key: str, long_streams: int, users: list[str]) -> list[float]:
    """TTFT of the short requests ``users`` while ``long_streams`` long generations stream."""
    http = gateway_http(url, key, max_connections=long_streams + 4, timeout_s=300.0)
    try:
        long_chat = GatewayChat(http, idle_timeout_s=60.0, user=LONG_USER, max_tokens=400)
        longs = [asyncio.create_task(long_chat.stream()) for _ in range(long_streams)]
        await asyncio.sleep(2.0)  # all admitted and decoding
        samples = []
        for user in users:
            if any(task.done() for task in longs):
                break
            samples.append((await GatewayChat(http, idle_timeout_s=60.0, user=user, max_tokens=8).stream()).ttft_ms)
            await asyncio.sleep(0.2)
        results: list[StreamTiming | BaseException] = await asyncio.gather(*longs, return_exceptions=True)
        if any(isinstance(r, BaseException) for r in results):
            raise RuntimeError(f"a long generation failed: {results}")
        return samples
    finally:
        await http.aclose()


async def _measure(url: str, key: str, streams: list[int], repeats: int, timing: tuple[float, float],
                   result: dict[str, Any], cpu: CpuSnapshot | None = None, meter: WindowMeter | None = None,
                   isolation: EngineIsolation | None = None) -> None:
    http = gateway_http(url, key, max_connections=max(streams) + 4, timeout_s=300.0)
    try:
        chat = GatewayChat(http, idle_timeout_s=60.0)
        await run_streams(chat.stream, 1, 0.0)  # warm-up
        for repeat in range(repeats):
            for count in streams:
                served = await closed_loop(chat, count, *timing, cpu=cpu, meter=meter)
                result["served"].append({"repeat": repeat, "streams": count, **served})
                log(f"served x{count} #{repeat + 1}: {served['aggregate_tokens_per_s']:.1f} tok/s, "
                    f"{served['generations']} generations, {served['errors']} errors")
            for row in _ceiling(streams, isolation):
                result["ceiling"].append({"repeat": repeat, **row})
                log(f"ceiling x{row['streams']} #{repeat + 1}: {row['tokens_per_s']:.1f} tok/s")
        result["ttft_idle_ms"] = await _ttft(http, short_users(False, 7))
        result["ttft_idle_new_question_ms"] = await _ttft(http, short_users(True, 7))
    finally:
        await http.aclose()
    result["ttft_under_8_long_ms"] = await _ttft_under_load(url, key, 8, short_users(False, 7))
    result["ttft_under_8_long_new_question_ms"] = await _ttft_under_load(url, key, 8, short_users(True, 7, 100))


def summarize(result: dict[str, Any], streams: list[int]) -> list[dict[str, Any]]:
    """One row per stream count: medians over repeats, percentiles over every generation."""
    rows = []
    for count in streams:
        served = [r for r in result["served"] if r["streams"] == count]
        ceiling = [r["tokens_per_s"] for r in result["ceiling"] if r["streams"] == count]
        ttft = [v for r in served for v in r["ttft_ms"]]
        itl = [v for r in served for v in r["itl_ms"]]
        aggregate = statistics.median(r["aggregate_tokens_per_s"] for r in served)
        rows.append({"streams": count, "served_tokens_per_s": aggregate,
                     "ceiling_tokens_per_s": statistics.median(ceiling), "errors": sum(r["errors"] for r in served),
                     "ttft_p50_ms": _pct(ttft, 0.5), "ttft_p99_ms": _pct(ttft, 0.99),
                     "itl_p50_ms": _pct(itl, 0.5), "itl_p99_ms": _pct(itl, 0.99), "generations": len(ttft),
                     "cpu_ms_per_token": _median_by_key([r.get("cpu_ms_per_token", {}) for r in served]),
                     **_cycle_row(served)})
    single = rows[0]["served_tokens_per_s"] if rows and rows[0]["streams"] == 1 else float("nan")
    for row in rows:
        row["served_over_ceiling"] = row["served_tokens_per_s"] / row["ceiling_tokens_per_s"]
        row["served_over_single"] = row["served_tokens_per_s"] / single
    return rows


def _cycle_row(served: list[dict[str, Any]]) -> dict[str, float]:
    """The cycle figures of one stream count: medians over repeats (token-weighted gap, Triton
    queue wait), medians over generations (tail, turnaround), the most others took of the cores.
    NaN where a report predates them."""
    def median_of(key: str) -> float:
        values = [r[key] for r in served if r.get(key) == r.get(key) and key in r]
        return statistics.median(values) if values else math.nan

    def pooled(key: str) -> float:
        return _pct([v for r in served for v in r.get(key, [])], 0.5)

    shares = [r["others_share"] for r in served if "others_share" in r]
    return {"itl_token_mean_ms": median_of("itl_token_mean_ms"), "tail_p50_ms": pooled("tail_ms"),
            "turnaround_p50_ms": pooled("turnaround_ms"),
            "triton_queue_ms_per_request": median_of("triton_queue_ms_per_request"),
            "others_share_max": max(shares) if shares else math.nan,
            **{key: median_of(key) for key in ENGINE_WINDOW_KEYS}}


def _median_by_key(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({key for sample in samples for key in sample})
    return {key: statistics.median(s[key] for s in samples if key in s) for key in keys}


def _cpu_table(rows: list[dict[str, Any]]) -> list[str]:
    """CPU milliseconds per generated token by component (medians over repeats)."""
    names = sorted({name for r in rows for name in r["cpu_ms_per_token"]})
    if not names:
        return []
    lines = ["", "| streams | " + " | ".join(f"{name} CPU ms/token" for name in names) + " |",
             "|---:|" + "---:|" * len(names)]
    for r in rows:
        cells = " | ".join(f"{r['cpu_ms_per_token'].get(name, float('nan')):.2f}" for name in names)
        lines.append(f"| {r['streams']} | {cells} |")
    return lines


def _table(columns: list[str], rows: list[dict[str, Any]], cells: Callable[[dict[str, Any]], list[str]]) -> list[str]:
    """A blank line, then a Markdown table of ``rows`` (right-aligned columns)."""
    return ["", "| " + " | ".join(columns) + " |", "|" + "---:|" * len(columns),
            *("| " + " | ".join(cells(r)) + " |" for r in rows)]


def markdown(rows: list[dict[str, Any]], result: dict[str, Any]) -> str:
    lines = ["| streams | served tok/s | engine ceiling tok/s | served / ceiling | served / 1 stream "
             "| TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | generations |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['streams']} | {r['served_tokens_per_s']:.1f} | {r['ceiling_tokens_per_s']:.1f} "
                     f"| {r['served_over_ceiling']:.2f} | {r['served_over_single']:.2f} | {r['ttft_p50_ms']:.1f} "
                     f"| {r['ttft_p99_ms']:.1f} | {r['itl_p50_ms']:.1f} | {r['itl_p99_ms']:.1f} | {r['generations']} |")
    lines.extend(_cpu_table(rows))
    lines.extend(_table(["streams", "ITL token-weighted ms", "tail p50 ms", "turnaround p50 ms",
                         "Triton queue ms/request", "others' share (max)"], rows, lambda r: [
        f"{r['streams']}", f"{r['itl_token_mean_ms']:.1f}", f"{r['tail_p50_ms']:.1f}", f"{r['turnaround_p50_ms']:.2f}",
        f"{r['triton_queue_ms_per_request']:.1f}", f"{r['others_share_max']:.1%}"]))
    lines.extend(_table(["streams", "engine busy share", "steps/s", "step ms", "prompt tokens/step",
                         "decoding sequences/step", "attended positions/step"], rows, lambda r: [
        f"{r['streams']}", f"{r['engine_busy_share']:.1%}", f"{r['engine_steps_per_s']:.1f}",
        f"{r['engine_step_ms']:.1f}", f"{r['engine_prefill_tokens_per_step']:.1f}",
        f"{r['engine_decode_tokens_per_step']:.1f}", f"{r['engine_attention_positions_per_step']:.0f}"]))
    lines.append("")
    for label, suffix in (("same question each time", ""), ("a new question each time", "_new_question")):
        idle = statistics.median(result[f"ttft_idle{suffix}_ms"])
        busy = statistics.median(result[f"ttft_under_8_long{suffix}_ms"])
        lines.append(f"Short request TTFT ({label}): idle {idle:.1f} ms, while 8 long generations stream "
                     f"{busy:.1f} ms (medians of 7): **{busy / idle:.2f}x**")
    return "\n".join(lines) + "\n"


@app.command()
def main(out: Annotated[Path, typer.Option(help="JSON report.")] = BENCH_RESULTS / "continuous.json",
         repeats: Annotated[int, typer.Option(min=1)] = 3,
         warmup_s: Annotated[float, typer.Option(min=0.0, help="Seconds before counting.")] = 4.0,
         duration_s: Annotated[float, typer.Option(min=1.0, help="Seconds counted per run.")] = 12.0,
         streams: Annotated[str, typer.Option(help="Concurrent stream counts.")] = "1,4,8,16",
         api_key: Annotated[str, typer.Option()] = "demo-premium-key",
         yield_to_engine: Annotated[bool, typer.Option(
             help="Run the gateway and this load generator at nice 10, so the engine's threads get a "
                  "core whenever they are runnable, as on a worker host of their own.")] = False,
         isolate_engine: IsolateEngine = False,
         scheduling: Annotated[Path | None, typer.Option(
             exists=True, dir_okay=False,
             help="A scheduling.yaml for the stack instead of the shipped one (an A/B of gateway settings).")] = None,
         ) -> None:
    """See the module docstring."""
    counts = [int(s) for s in streams.split(",") if s.strip()]
    isolation = isolation_if(isolate_engine)
    result: dict[str, Any] = {"command": command_line(), "machine": machine_facts(), "served": [], "ceiling": [],
                              "settings": {"repeats": repeats, "warmup_s": warmup_s, "duration_s": duration_s,
                                           "streams": counts}, **isolation_entry(isolation)}
    started = time.time()
    with private_stack_options(isolation, scheduling) as options, \
            bench_stack(options, log=lambda m: log(str(m))) as endpoints:
        if yield_to_engine and endpoints.gateway_pid is not None:
            for pid in (endpoints.gateway_pid, os.getpid()):
                renice_tree(pid, YIELD_NICE)
            result["settings"]["gateway_and_load_generator_nice"] = YIELD_NICE
        def cpu() -> dict[str, float]:
            return component_seconds(endpoints.gateway_pid, endpoints.triton_pid, "chat")

        own = [pid for pid in (endpoints.gateway_pid, endpoints.triton_pid) if pid is not None]
        asyncio.run(_measure(endpoints.gateway_url, api_key, counts, repeats, (warmup_s, duration_s), result,
                             cpu, window_meter(endpoints.triton_http, own, endpoints.triton_metrics), isolation))
    result["elapsed_s"] = round(time.time() - started, 1)
    result["summary"] = summarize(result, counts)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(markdown(result["summary"], result))

