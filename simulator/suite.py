"""The experiments of ``docs/simulation.md``, each writing ``<name>.json``, ``<name>.md`` and its
plots under an output folder and returning its headline figures. ``on_run(label)`` is called
before each simulated run (the CLI draws a progress bar from it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from simulator.experiments import capacity_rps, cost_by_prompt_length, sweep
from simulator.metrics import RunSummary
from simulator.noisy import run_noisy
from simulator.perf.fidelity import TOLERANCE, fidelity_points, fit_efficiency
from simulator.perf.hardware import EFFICIENCY
from simulator.planning import PLANNING_TYPES, Plan, plan_pool
from simulator.pools import mix_label, parse_mix
from simulator.report import (
    plot_attainment_vs_load,
    plot_cost_vs_attainment,
    plot_ttft_cdf,
    summary_table,
    write_json,
)
from simulator.runner import RunSpec, requests_for, simulate
from simulator.trace_files import load_items
from simulator.workloads import DEFAULT_TRACES_DIR, load_azure, load_lengths, mean_rate, scale_load, window

OnRun = Callable[[str], None]
ALL_POLICIES = ("shunter", "shunter-slo", "fcfs", "fifo-gateway", "round-robin", "priority-only", "triton-queue")


def _none(_: str) -> None:
    """No progress."""


def overload(out: Path, pool: str = "h100:16", load: float = 1.5, trace: str = "conv",
             traces_dir: Path = DEFAULT_TRACES_DIR, policies: Sequence[str] = ALL_POLICIES, seed: int = 0,
             on_run: OnRun = _none) -> dict[str, Any]:
    """Every policy on the whole trace, time-compressed to ``load`` x the pool's capacity."""
    items, mix = load_items(trace, traces_dir), parse_mix(pool)
    on_run("capacity probe")
    capacity = capacity_rps(items, mix, seed)
    scale = load * capacity / mean_rate(items)
    scaled = scale_load(items, scale)
    arrivals = requests_for(scaled, None, seed)
    summaries: dict[str, RunSummary] = {}
    ttfts: dict[str, list[float]] = {}
    for policy in policies:
        on_run(policy)
        result, summaries[policy] = simulate(RunSpec(policy, mix, seed), arrivals)
        ttfts[policy] = [r.ttft_s for r in result.records if r.ttft_s is not None]
    fcfs = summaries["fcfs"].overall.goodput_rps if "fcfs" in summaries else None
    headline = {
        "pool": pool, "trace": trace, "capacity_rps": capacity, "load": load, "offered_rps": mean_rate(scaled),
        "goodput_rps": {p: s.overall.goodput_rps for p, s in summaries.items()},
        "goodput_vs_fcfs": {p: (s.overall.goodput_rps / fcfs if fcfs else None) for p, s in summaries.items()},
        "premium_attainment": {p: s.by_tier["premium"].attainment for p, s in summaries.items()},
    }
    write_json(out / "overload.json", {"headline": headline, "summaries": summaries})
    (out / "overload.md").write_text(
        f"# Overload: {trace} trace, {pool}, {load}x capacity ({capacity:.1f} req/s)\n\n" + summary_table(summaries))
    plot_ttft_cdf(ttfts, out / "overload_ttft_cdf.png", f"TTFT, {trace} trace, {pool}, {load}x capacity")
    return headline


SWEEP_POLICIES = ("shunter", "shunter-slo", "fcfs", "triton-queue")


def load_sweep(out: Path, pool: str = "h100:16", loads: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0),
               trace: str = "conv", window_s: float | None = None, traces_dir: Path = DEFAULT_TRACES_DIR,
               policies: Sequence[str] = SWEEP_POLICIES, seed: int = 0, on_run: OnRun = _none) -> dict[str, Any]:
    """Attainment versus load and the DistServe goodput of each policy (the whole trace unless
    ``window_s``: a short window never reaches steady state, the engines' slots absorb it)."""
    items, mix = load_items(trace, traces_dir), parse_mix(pool)
    if window_s is not None:
        items = window(items, 0.0, window_s)
    on_run("capacity probe")
    capacity = capacity_rps(items, mix, seed)
    scales = [load * capacity / mean_rate(items) for load in loads]
    result = sweep(items, mix, policies, scales, seed, progress=on_run)
    attainment = {p: [c.summaries[p].overall.attainment for c in result.points] for p in policies}
    headline = {"pool": pool, "capacity_rps": capacity, "loads": list(loads), "attainment": attainment,
                "distserve_goodput_rps": result.goodput_rps}
    write_json(out / "sweep.json", headline)
    span = f"{window_s / 60:.0f} min" if window_s is not None else "whole"
    plot_attainment_vs_load(loads, attainment, out / "sweep_attainment.png",
                            f"SLO attainment vs load, {trace} trace ({span}), {pool}")
    return headline


def noisy(out: Path, pool: str = "a100-80:2", window_s: float = 1200.0, burst: float = 10.0,
          traces_dir: Path = DEFAULT_TRACES_DIR, policies: Sequence[str] = ("shunter", "fcfs", "priority-only"),
          seed: int = 0, on_run: OnRun = _none) -> dict[str, Any]:
    items = window(load_azure("conv", traces_dir), 0.0, window_s)
    for policy in policies:
        on_run(policy)
    results = run_noisy(items, parse_mix(pool), policies, burst, seed)
    headline = {"pool": pool, "burst": burst, "results": results,
                "ratio": {r.policy: r.ratio for r in results}}
    write_json(out / "noisy.json", headline)
    rows = ["| policy | quiet p99 TTFT, no burst (s) | with burst (s) | ratio | noisy rejected / offered |",
            "|---|---|---|---|---|"]
    rows += [f"| {r.policy} | {r.quiet_p99_ttft_s:.2f} | {r.quiet_p99_ttft_burst_s:.2f} | {r.ratio:.2f} | "
             f"{r.noisy_rejected} / {r.noisy_offered} |" for r in results if r.ratio is not None]
    (out / "noisy.md").write_text(f"# Noisy tenant bursting {burst:g}x its quota, {pool}\n\n" + "\n".join(rows) + "\n")
    return headline


def plan(out: Path, window_s: float = 600.0, scale: float = 4.0, trace: str = "conv", policy: str = "shunter",
         max_evaluations: int = 40, traces_dir: Path = DEFAULT_TRACES_DIR, seed: int = 0,
         on_run: OnRun = _none) -> dict[str, Any]:
    items = scale_load(window(load_items(trace, traces_dir), 0.0, window_s), scale)
    result: Plan = plan_pool(requests_for(items, None, seed), policy, max_evaluations=max_evaluations, seed=seed,
                             progress=lambda e: on_run(mix_label(e.mix)))
    on_run("cost by prompt length")
    bands = cost_by_prompt_length(items, PLANNING_TYPES, seed=seed)
    headline = {"trace": trace, "window_s": window_s, "scale": scale, "offered_rps": mean_rate(items),
                "best_single": result.best_single, "best_mix": result.best_mix, "savings": result.savings,
                "evaluations": result.evaluations, "skipped_too_small": result.skipped_too_small,
                "cost_by_prompt_length": bands}
    write_json(out / "plan.json", headline)
    rows = ["| prompt tokens | requests | " + " | ".join(f"{g} req/s, $/h per req/s" for g in PLANNING_TYPES) + " |",
            "|---|---|" + "---|" * len(PLANNING_TYPES)]
    for band in range(len(bands) // len(PLANNING_TYPES)):
        row = bands[band * len(PLANNING_TYPES): (band + 1) * len(PLANNING_TYPES)]
        span = f"{row[0].low}-{row[0].high}" if row[0].high is not None else f">= {row[0].low}"
        rows.append(f"| {span} | {row[0].requests} | "
                    + " | ".join(f"{b.capacity_rps:.2f}, {b.cost_per_rps:.3f}" for b in row) + " |")
    (out / "plan.md").write_text(f"# Cost by prompt length, {trace} trace, first {window_s / 60:.0f} min "
                                 "(one GPU of each type, saturated)\n\n" + "\n".join(rows) + "\n")
    points = [(mix_label(e.mix), e.cost_per_hour, e.attainment, e.met) for e in result.evaluations]
    plot_cost_vs_attainment(points, out / "plan_cost_attainment.png",
                            f"Pool mixes, {trace} trace x{scale:g} ({window_s / 60:.0f} min), policy {policy}")
    return headline


def fidelity(out: Path) -> dict[str, Any]:
    points = fidelity_points()
    headline = {"tolerance": TOLERANCE, "within": sum(p.within for p in points), "points": len(points),
                "outside": [p.what for p in points if not p.within],
                "max_abs_error": max(abs(p.error) for p in points),
                "efficiency": asdict(EFFICIENCY), "least_squares_fit": asdict(fit_efficiency())}
    write_json(out / "fidelity.json", {"headline": headline, "points": points})
    rows = ["| point | source | published | modelled | error |", "|---|---|---|---|---|"]
    rows += [f"| {p.what} | {p.source} | {p.published:.2f} {p.unit} | {p.modelled:.2f} {p.unit} | {p.error:+.1%} |"
             for p in points]
    (out / "fidelity.md").write_text("# Fidelity of the LLM worker model\n\n" + "\n".join(rows) + "\n")
    return headline


def speed(out: Path, pool: str = "h100:16", policy: str = "shunter", traces_dir: Path = DEFAULT_TRACES_DIR,
          on_run: OnRun = _none) -> dict[str, Any]:
    """CPU seconds to simulate the whole conversation trace (one hour, real time) on one core."""
    items = load_azure("conv", traces_dir)
    arrivals = requests_for(items)
    on_run(policy)
    start = time.process_time()
    result, _ = simulate(RunSpec(policy, parse_mix(pool)), arrivals)
    cpu_s = time.process_time() - start
    hours = items[-1].arrival_s / 3600.0
    headline = {"pool": pool, "policy": policy, "requests": len(items), "simulated_hours": hours, "cpu_s": cpu_s,
                "cpu_s_per_simulated_hour": cpu_s / hours, "simulated_requests_per_s": len(items) / cpu_s,
                "events": result.events}
    write_json(out / "speed.json", headline)
    return headline


def autoscale(out: Path, gpu: str = "a10", day_s: float = 7200.0, peak_replicas: int = 8,
              traces_dir: Path = DEFAULT_TRACES_DIR, seed: int = 0, on_run: OnRun = _none,
              jobs: int = 1) -> dict[str, Any]:
    """One day (10x diurnal swing, unannounced 3x spike) under static peak, static mean, a
    request-rate HPA and ``shunter`` (``simulator.autoscale_day``; docs/autoscaling.md)."""
    from simulator.autoscale_day import DaySpec, run_day
    from simulator.autoscale_report import write

    spec = DaySpec(gpu=gpu, day_s=day_s, peak_replicas=peak_replicas, seed=seed)
    curve, capacity, results = run_day(load_azure("conv", traces_dir), spec, progress=on_run,
                                       long_lengths=load_lengths("arxiv", traces_dir), jobs=jobs)
    return write(out, spec, curve, capacity, results)
