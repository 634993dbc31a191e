"""The autoscaling experiment's outputs: ``autoscale.json`` (headline and per-policy figures),
``autoscale.md`` (the table of ``docs/autoscaling.md``) and ``autoscale_replicas.png`` (demand and
replicas over the day, one line per policy)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulator.autoscale_day import DaySpec, PolicyResult, chosen_hpa
from simulator.day_mix import DriftingCurve
from simulator.report import write_json

TIERS = ("premium", "standard", "batch")


def headline(spec: DaySpec, curve: DriftingCurve, capacity: float, results: Sequence[PolicyResult]) -> dict[str, Any]:
    """Per policy: GPU-hours and $ (simulated and per 24 h day), attainment per tier (all day and
    during the spike), TTFT p50/p99, cold-start waits, scale events; and the targets' ratios."""
    by = {r.policy: r for r in results}
    rows = {r.policy: _row(r) for r in results}
    hpa = chosen_hpa(results)
    out: dict[str, Any] = {"spec": spec, "capacity_rps_per_replica": capacity,
                           "peak_work_rps": curve.work.peak_rps, "trough_work_rps": curve.work.trough_rps,
                           "long_request_work_ratio": curve.work_ratio,
                           "spike": [curve.spike_start_s, curve.spike_end_s],
                           "requests": results[0].summary.overall.requests if results else 0,
                           "hpa_chosen": hpa.policy if hpa else None, "policies": rows}
    if "shunter" in by and "static-peak" in by:
        s, p = by["shunter"], by["static-peak"]
        out["shunter_gpu_hours_vs_static_peak"] = s.gpu_hours / p.gpu_hours
        out["shunter_attainment_minus_static_peak_points"] = 100 * (s.summary.overall.attainment
                                                                    - p.summary.overall.attainment)
    if "shunter" in by and hpa is not None:
        s, h = by["shunter"], hpa
        out["shunter_attainment_minus_hpa_points"] = 100 * (s.summary.overall.attainment
                                                            - h.summary.overall.attainment)
        out["shunter_cost_vs_hpa"] = s.cost / h.cost if h.cost else None
    if "shunter" in by:
        out["shunter_premium_attainment_in_spike"] = by["shunter"].spike_attainment.get("premium")
    return out


def _row(r: PolicyResult) -> dict[str, Any]:
    s = r.summary
    return {"gpu_hours": r.gpu_hours, "gpu_hours_per_day": r.gpu_hours_per_day, "cost": r.cost,
            "cost_per_day": r.cost_per_day, "attainment": s.overall.attainment,
            "attainment_by_tier": {t: s.by_tier[t].attainment for t in TIERS if t in s.by_tier},
            "spike_attainment_by_tier": r.spike_attainment, "ttft_p50_s": s.overall.ttft_s["p50"],
            "ttft_p99_s": s.overall.ttft_s["p99"], "rejected": s.overall.rejected, "expired": s.overall.expired,
            "cold_waited": r.cold_waited, "cold_wait_p50_s": r.cold_wait_p50_s, "cold_wait_p95_s": r.cold_wait_p95_s,
            "scale_ups": r.scale_ups, "scale_downs": r.scale_downs, "decision_reasons": r.reasons}


def markdown(head: dict[str, Any]) -> str:
    spec: DaySpec = head["spec"]
    lines = [f"# Autoscaling: one day ({spec.day_s / 3600:g} h simulated), {spec.gpu} pool, work "
             f"{head['trough_work_rps']:.2f}-{head['peak_work_rps']:.2f} chat req/s + {spec.spike_factor:g}x spike, "
             f"long requests {100 * spec.long_low:g}-{100 * spec.long_high:g} % "
             f"(each {head['long_request_work_ratio']:.1f}x a chat request's work), {head['requests']} requests; "
             f"HPA compared: {head['hpa_chosen']}", "",
             "| policy | GPU-h (per 24 h) | $ (per 24 h) | attainment | premium | standard | batch | premium in spike "
             "| TTFT p50 / p99 (s) | cold-start waits (p50 / p95 s) | scale up / down |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in head["policies"].items():
        tiers = " | ".join(_pct(row["attainment_by_tier"].get(t)) for t in TIERS)
        cold = (f"{row['cold_waited']} ({_num(row['cold_wait_p50_s'])} / {_num(row['cold_wait_p95_s'])})"
                if row["cold_waited"] else "0")
        lines.append(f"| {name} | {row['gpu_hours']:.2f} ({row['gpu_hours_per_day']:.1f}) | {row['cost']:.2f} "
                     f"({row['cost_per_day']:.0f}) | {_pct(row['attainment'])} | {tiers} | "
                     f"{_pct(row['spike_attainment_by_tier'].get('premium'))} | {_num(row['ttft_p50_s'])} / "
                     f"{_num(row['ttft_p99_s'])} | {cold} | {row['scale_ups']} / {row['scale_downs']} |")
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot(curve: DriftingCurve, results: Sequence[PolicyResult], path: Path) -> None:
    """Demand (req/s, left axis) and ready replicas per policy (right axis) over the day."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.0, 4.5))
    hours = 24.0 / curve.day_s
    steps = 600
    ts = [curve.day_s * i / steps for i in range(steps + 1)]
    ax.fill_between([t * hours for t in ts], [curve.work.rps(t) for t in ts], color="0.85",
                    label="work (chat req/s equivalents)")
    ax.plot([t * hours for t in ts], [curve.rps(t) for t in ts], color="0.4", linewidth=0.8, label="req/s")
    ax.set_xlabel("hour of the day")
    ax.set_ylabel("requests per second")
    right = ax.twinx()
    for r in results:
        line = r.stats.timeline
        right.step([p.t_s * hours for p in line], [sum(p.ready.values()) + sum(p.starting.values()) for p in line],
                   where="post", label=r.policy, linewidth=1.2)
    right.set_ylabel("replicas (ready + starting)")
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    right.legend(handles, labels, loc="upper left", fontsize=8)
    ax.set_title("Demand and replicas over one day")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(out: Path, spec: DaySpec, curve: DriftingCurve, capacity: float,
          results: Sequence[PolicyResult]) -> dict[str, Any]:
    head = headline(spec, curve, capacity, results)
    write_json(out / "autoscale.json", head)
    (out / "autoscale.md").write_text(markdown(head))
    plot(curve, results, out / "autoscale_replicas.png")
    return head
