"""Fidelity of the simulator against the real local stack: a small trace, its real replay, its simulation.

Three steps, each a command, each writing under ``docs/sim/`` by default:

    python -m bench studies.fidelity_real trace     # the small trace (bench.studies.fidelity_trace):
                                                    # fidelity_real_trace.json
    flock /tmp/shunter-integration.lock python -m bench studies.fidelity_real replay
                                                    # through the real gateway + Triton: fidelity_real_replay.json
    python -m bench studies.fidelity_real simulate  # the same requests, simulator with the fitted worker
                                                    # (bench.studies.fit_cpu_worker's profile): fidelity_real.json

``replay`` starts a private stack (``bench.harness``: the project's config with quotas lifted and
response caches off, its own ports from ``--base-port``), sends one warm-up request, waits (up to
``--max-quiet-wait-s``) for other processes to leave the cores, then sends the trace open loop and
records how much CPU other processes took meanwhile (``bench.contention``). ``simulate`` builds
the scheduler exactly as the gateway does from the same written config (``scheduling.yaml``, the
local pool's capacity profile, the tenants), gives each request the engine steps its output took
on the real stack, and compares p50 and p99 TTFT of the requests that completed on both sides:
over the whole trace, and over the requests sent before other processes first took more than
15 % of the cores in a 2 s window (llama.cpp slows by up to 10 x under such contention).
``replay`` keeps the scheduling config it ran with (``scheduling.yaml`` next to its results; another
one for an A/B with ``--scheduling``), and ``simulate`` schedules with that file when it is there
(the project's otherwise), so a replay is re-simulated with the gateway settings it really had
(``simulate --scheduling FILE --result NAME``: with other settings, into another file).

``replay`` also reads the engine's step counters (``bench.triton_stats.engine_counters``) every
``ENGINE_SAMPLE_S`` while the trace runs: the engine's busy time and the totals of what its steps
fed. ``simulate`` sets them against the fitted model (``FittedPerf.host_time_scale``) and adds
two comparisons at the host's speed during the replay, as the engine measured it: one factor
for the whole replay (``host_calibrated``) and one factor per window (``host_timed``). They
separate what the simulator gets wrong from how far the host's speed moved since the profile was
fitted.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.contention import ContentionTimeline, CpuWatch, wait_for_quiet
from bench.cpu import check_same_isolation, isolation_entry
from bench.harness import BENCH_RESULTS, Endpoints, IsolateEngine, StackOptions, bench_stack, isolation_if, write_config
from bench.studies.fidelity_trace import (
    API_KEYS,
    OUTPUT_SHRINK,
    PROMPT_SHRINK,
    TENANT_SHARES,
    TraceOptions,
    build_trace,
    warm_up_item,
)
from bench.studies.replay import ReplayResult, warm_up
from bench.studies.replay import replay as run_replay
from bench.triton_stats import engine_busy, queue_wait, sample_engine_counters, triton_counts
from gateway.tokenization import LlmTokenizer
from scheduling.scheduler import build_scheduler
from settings.paths import PROJECT_ROOT, StackPaths
from settings.scheduling import load_scheduling
from settings.stack import load_stack_config
from settings.tenants import load_tenants
from settings.workers import worker_addresses
from simulator.perf.fitted import EngineBusy, FittedPerf, TimedPerf
from simulator.perf.protocol import LlmPerfModel
from simulator.records import RequestRecord
from simulator.replay_sim import GatewaySetup, ReplayRequest, compare_ttft, simulate_replay
from simulator.served_path import ServedPath

app = typer.Typer(add_completion=False, no_args_is_help=True)
OUT = Path("docs/sim")
CONFIG_DIR = BENCH_RESULTS / "fidelity_config"
SIM_CONFIG_DIR = BENCH_RESULTS / "fidelity_sim_config"  # simulate's own: a replay may be running on CONFIG_DIR
QUIET_SHARE = 0.15  # other processes' share of the cores above which a replay window counts as contended
CONTENTION_WINDOW_S = 2.0  # bench.contention.ContentionTimeline's default interval
ENGINE_SAMPLE_S = 10.0  # interval of the engine counter readings during a replay
MIN_WINDOW_BUSY_S = 1.0  # engine busy time below which a window's own host speed is not used
Out = Annotated[Path, typer.Option(help="folder of the JSON and Markdown results")]
BasePort = Annotated[int, typer.Option(help="first worker port of the private stack")]


@app.command()
def trace(out: Out = OUT, count: int = 100, rate_per_s: float = 0.6, seed: int = 0) -> None:
    """Derive the small trace and write its chat conversations."""
    tokenizer = LlmTokenizer(StackPaths().artifacts / "chat" / "model.gguf")
    items = build_trace(TraceOptions(count, rate_per_s, seed), tokenizer)
    derivation = {"source": "AzureLLMInferenceTrace_conv.csv, first rows", "count": count,
                  "rate_per_s": rate_per_s, "seed": seed, "prompt_shrink": asdict(PROMPT_SHRINK),
                  "output_shrink": asdict(OUTPUT_SHRINK), "tenant_shares": dict(TENANT_SHARES)}
    _write(out / "fidelity_real_trace.json", {"derivation": derivation, "requests": items})
    print(f"{len(items)} requests over {items[-1]['arrival_s']:.1f} s")


@app.command()
def replay(out: Out = OUT, base_port: BasePort = 29100, max_quiet_wait_s: float = 300.0,
           isolate_engine: IsolateEngine = False,
           scheduling: Annotated[Path | None, typer.Option(
               help="the gateway's scheduling.yaml, for an A/B of settings (default: the project's)")] = None) -> None:
    """Replay the trace through a private real stack (hold the integration lock)."""
    items = json.loads((out / "fidelity_real_trace.json").read_text())["requests"]
    isolation = isolation_if(isolate_engine)
    options = StackOptions(gateway_port=base_port + 80, control_port=base_port + 81, base_port=base_port,
                           config_dir=CONFIG_DIR, repository=PROJECT_ROOT / "var" / "fidelity_repository",
                           isolation=isolation, scheduling_file=scheduling)
    load_before = os.getloadavg()
    with bench_stack(options) as endpoints:
        shutil.copyfile(CONFIG_DIR / "scheduling.yaml", out / "scheduling.yaml")  # what this stack runs with
        tokenizer = LlmTokenizer(StackPaths().artifacts / "chat" / "model.gguf")
        warm = asyncio.run(warm_up(endpoints.gateway_url, warm_up_item(tokenizer, items[0], items[0]["prompt_tokens"])))
        print(f"warm-up: HTTP {warm.status}, TTFT {warm.ttft_s}")
        quiet = wait_for_quiet(max_quiet_wait_s)
        watch = CpuWatch([])  # this process's tree: the stack it started (gateway, control, Triton)
        timeline = ContentionTimeline([]).start()
        queued_before = asyncio.run(triton_counts(endpoints.triton_http, "chat"))
        results, engine_timeline = asyncio.run(_replay_sampling_engine(endpoints, items))
        triton = queue_wait(queued_before, asyncio.run(triton_counts(endpoints.triton_http, "chat")))
        busy = engine_busy(engine_timeline[0][1], engine_timeline[-1][1]) if engine_timeline else None
        contention = {**watch.stop(), "quiet_wait_s": quiet["waited_s"], "timeline_others_share": timeline.stop()}
    statuses: dict[int, int] = {}
    for result in results:
        statuses[result.status] = statuses.get(result.status, 0) + 1
    _write(out / "fidelity_real_replay.json", {
        "load_average_1_5_15": {"before": load_before, "after": os.getloadavg()}, "contention": contention,
        **isolation_entry(isolation),
        "statuses": statuses, "triton_queue": triton, "engine_busy": busy, "engine_timeline": engine_timeline,
        "results": [asdict(r) for r in results]})
    print(f"statuses: {statuses}; other processes: {contention}; Triton's queue: {triton}; engine: {busy}")


async def _replay_sampling_engine(endpoints: Endpoints, items: list[dict[str, Any]],
                                  ) -> tuple[list[ReplayResult], list[tuple[float, dict[str, float]]]]:
    """The trace's replay, and the engine's step counters every ``ENGINE_SAMPLE_S`` meanwhile
    (from just before its first request to just after its last)."""
    done = asyncio.Event()
    sampler = asyncio.create_task(sample_engine_counters(endpoints.triton_metrics or "", done, ENGINE_SAMPLE_S))
    try:
        results = await run_replay(endpoints.gateway_url, items)
    finally:
        done.set()
    return results, await sampler


def gateway_setup(config_dir: Path) -> GatewaySetup:
    """The scheduler, SLOs and local worker of the gateway configured by ``config_dir``."""
    paths = StackPaths(config_dir=config_dir)
    config = load_stack_config(paths.pools_file, paths.models_file)
    settings = load_scheduling(paths.scheduling_file, config)
    worker = worker_addresses(config)[0]
    pool = next(p for p in config.pools if p.name == worker.pool)
    return GatewaySetup(lambda: build_scheduler(settings.scheduler, settings.limits), settings.slo,
                        settings.profile_of(pool.profile_name), worker.name, pool.name, pool.region)


def replay_requests(items: list[dict[str, Any]], results: list[dict[str, Any]],
                    config_dir: Path) -> list[ReplayRequest]:
    """The trace's requests with their tenants as the gateway authenticates them and the engine
    steps their output took (completion tokens, plus the end-of-generation sample when the model
    stopped by itself; ``max_tokens`` when the real request did not complete)."""
    tenants = load_tenants(StackPaths(config_dir=config_dir).tenants_file)
    by_id = {r["request_id"]: r for r in results}
    requests = []
    for item in items:
        tenant = tenants.authenticate(API_KEYS[item["tenant"]])
        if tenant is None:
            raise ValueError(f"tenant {item['tenant']} is not in {config_dir}")
        real = by_id.get(item["request_id"], {})
        steps = real.get("completion_tokens", 0) + (1 if real.get("finish_reason") == "stop" else 0)
        requests.append(ReplayRequest(item["request_id"], tenant, item["arrival_s"], item["prompt_tokens"],
                                      item["max_tokens"], steps if real.get("status") == 200 else item["max_tokens"]))
    return requests


@app.command()
def simulate(out: Out = OUT, profile: Annotated[Path, typer.Option(help="fitted worker profile")] =
             OUT / "cpu_worker_profile.json", base_port: BasePort = 29100,
             scheduling: Annotated[Path | None, typer.Option(
                 help="schedule with this scheduling.yaml, not the one the replay ran with")] = None,
             result: Annotated[str, typer.Option(help="file name of the result in --out")] = "fidelity_real.json",
             ) -> None:
    """Simulate the replayed requests with the fitted worker; compare TTFT with the real run."""
    recorded = out / "scheduling.yaml"
    write_config(PROJECT_ROOT / "config", SIM_CONFIG_DIR, base_port,
                 scheduling_file=scheduling or (recorded if recorded.exists() else None))
    items = json.loads((out / "fidelity_real_trace.json").read_text())["requests"]
    replayed = json.loads((out / "fidelity_real_replay.json").read_text())
    real = replayed["results"]
    requests = replay_requests(items, real, SIM_CONFIG_DIR)
    profile_data = json.loads(profile.read_text())
    check_same_isolation(f"{profile} and the replay", profile_data, replayed)
    perf, path = FittedPerf.from_profile(profile_data), ServedPath.from_profile(profile_data)
    setup = gateway_setup(SIM_CONFIG_DIR)
    records = simulate_replay(requests, setup, perf, path)
    sim_ttft = {r.request_id: r.ttft_s for r in records}
    calibrated = _host_calibrations(replayed, perf, lambda model: {
        r.request_id: r for r in simulate_replay(requests, setup, model, path)})
    timeline = replayed.get("contention", {}).get("timeline_others_share", [])
    quiet_until_s = next((t - CONTENTION_WINDOW_S for t, share in timeline if share > QUIET_SHARE), math.inf)
    real_by_id = {r["request_id"]: r for r in real}
    rows = [{"request_id": r.request_id, "tenant": r.tenant, "prompt_tokens": r.prefill_tokens,
             "output_steps": r.output_tokens, "real_status": real_by_id[r.request_id]["status"],
             "real_sent_s": real_by_id[r.request_id]["sent_s"], "real_ttft_s": real_by_id[r.request_id]["ttft_s"],
             "real_gateway_queue_s": real_by_id[r.request_id].get("gateway_queue_s"),
             "sim_outcome": r.outcome, "sim_ttft_s": r.ttft_s,
             **{f"sim_{name}_ttft_s": by_id[r.request_id].ttft_s for name, (_, by_id) in calibrated.items()},
             "sim_gateway_queue_s": None if r.dispatch_s is None else r.dispatch_s - r.arrival_s}
            for r in records]
    headline = {"all": _comparison(real, sim_ttft), "sim_outcomes": _count(r.outcome for r in records),
                "real_statuses": _count(r["status"] for r in real),
                "quiet_until_s": None if math.isinf(quiet_until_s) else quiet_until_s,
                "before_contention": _comparison([r for r in real if r["sent_s"] < quiet_until_s], sim_ttft)
                if timeline else None,
                **{name: {**scales, "sim_outcomes": _count(r.outcome for r in by_id.values()),
                          **(_comparison(real, {i: r.ttft_s for i, r in by_id.items()}) or {})}
                   for name, (scales, by_id) in calibrated.items()}}
    _write(out / result, {"headline": headline, "requests": rows})
    print(json.dumps(headline, indent=1))


def _busy_windows(timeline: list[list[Any]]) -> list[tuple[float, EngineBusy]]:
    """``(window end (s), what the engine did)`` between consecutive counter readings of the replay."""
    windows = []
    for (_, before), (end_s, after) in pairwise(timeline):
        busy = engine_busy(before, after)
        if busy is not None:
            windows.append((round(end_s, 1), EngineBusy.from_json(busy)))
    return windows


Calibrated = dict[str, tuple[dict[str, Any], dict[str, RequestRecord]]]


def _host_calibrations(replayed: dict[str, Any], perf: FittedPerf,
                       simulate: Callable[[LlmPerfModel], dict[str, RequestRecord]]) -> Calibrated:
    """The records (by request id) simulated at the replay's host speed as the engine measured it,
    by name, each with the scales it used: ``host_calibrated``, the engine's busy time over the
    whole replay against the model's (one factor); ``host_timed``, one factor per window
    (``TimedPerf``; a window busy less than ``MIN_WINDOW_BUSY_S``, mostly step overhead and noise,
    takes the whole replay's). Empty when the replay counted no steps (an engine without step
    counters)."""
    busy = replayed.get("engine_busy")
    if not busy or busy.get("steps", 0) <= 0:
        return {}
    scale = perf.host_time_scale(EngineBusy.from_json(busy))
    calibrated: Calibrated = {"host_calibrated": ({"time_scale": scale}, simulate(perf.rescaled(scale)))}
    windows = _busy_windows(replayed.get("engine_timeline") or [])
    if windows:
        by_window = [(end_s, perf.host_time_scale(w) if w.step_s >= MIN_WINDOW_BUSY_S else scale)
                     for end_s, w in windows]
        timed = TimedPerf(tuple((end_s, perf.rescaled(s)) for end_s, s in by_window))
        calibrated["host_timed"] = ({"window_scales": [[end_s, round(s, 3)] for end_s, s in by_window]},
                                    simulate(timed))
    return calibrated


def _comparison(real: list[dict[str, Any]], sim_ttft: dict[str, float | None]) -> dict[str, Any] | None:
    """TTFT comparison over the requests that completed on both sides (None if there are none)."""
    both = [r for r in real if r["ttft_s"] is not None and sim_ttft[r["request_id"]] is not None]
    if not both:
        return None
    comparison = compare_ttft([r["ttft_s"] for r in both], [sim_ttft[r["request_id"]] or 0.0 for r in both])
    return {**asdict(comparison), "p50_error": comparison.p50_error, "p99_error": comparison.p99_error,
            "within_25_percent": comparison.within}


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[str(value)] = counts.get(str(value), 0) + 1
    return counts


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")

