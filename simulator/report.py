"""Reports: results as JSON (sorted keys, rounded floats: the same run gives the same bytes), a
Markdown table, and PNG plots (matplotlib, imported only when a plot is drawn)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.metrics import RunSummary

DIGITS = 6


def to_data(value: Any) -> Any:
    """Dataclasses, mappings, sequences and floats to JSON-ready data with rounded floats."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value) if not f.name.startswith("_")]
        return {name: to_data(getattr(value, name)) for name in fields}
    if isinstance(value, Mapping):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_data(v) for v in value]
    if isinstance(value, float):
        return round(value, DIGITS)
    return value


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_data(data), indent=2, sort_keys=True) + "\n")


def _fmt(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def summary_table(summaries: Mapping[str, RunSummary]) -> str:
    """One row per policy: attainment (overall, per tier), goodput, TTFT/TPOT p50/p99, fairness, cost."""
    tiers = ("premium", "standard", "batch")
    head = ("| policy | attainment | " + " | ".join(f"{t}" for t in tiers)
            + " | SLO goodput (req/s) | TTFT p50 / p90 / p99 (s) | TPOT p50 / p99 (ms) | rejected | expired"
            + " | preempted | Jain | max gap | GPU util | $/M tokens in SLO |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in summaries.items():
        o = s.overall
        tier_cells = " | ".join(_fmt(s.by_tier[t].attainment, 100, 1) + " %" if t in s.by_tier else "-" for t in tiers)
        ttft = " / ".join(_fmt(o.ttft_s[p]) for p in ("p50", "p90", "p99"))
        tpot = " / ".join(_fmt(o.tpot_s[p], 1000, 1) for p in ("p50", "p99"))
        rows.append(f"| {name} | {_fmt(o.attainment, 100, 1)} % | {tier_cells} | {_fmt(o.goodput_rps, digits=1)} | "
                    f"{ttft} | {tpot} | {o.rejected} | {o.expired} | {s.preemptions} | "
                    f"{_fmt(s.jain_index, digits=3)} | "
                    f"{_fmt(s.max_weighted_service_gap, digits=0)} | {_fmt(s.gpu_utilisation, 100, 0)} % | "
                    f"{_fmt(s.cost_per_million_slo_tokens)} |")
    return "\n".join(rows) + "\n"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)


def plot_ttft_cdf(ttfts: Mapping[str, Sequence[float]], path: Path, title: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, values in ttfts.items():
        ordered = sorted(values)
        if ordered:
            ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=name)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s, log)")
    ax.set_ylabel("share of completed requests")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, path)


def plot_attainment_vs_load(loads: Sequence[float], attainment: Mapping[str, Sequence[float]], path: Path,
                            title: str) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, values in attainment.items():
        ax.plot(loads, [v * 100 for v in values], marker="o", label=name)
    ax.axhline(90, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("offered load (x pool capacity)")
    ax.set_ylabel("SLO attainment (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, path)


def plot_cost_vs_attainment(points: Sequence[tuple[str, float, float, bool]], path: Path, title: str) -> None:
    """``points``: (label, $/h, attainment, met)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, cost, attainment, met in points:
        ax.scatter(cost, attainment * 100, color="tab:green" if met else "tab:red", s=18)
        ax.annotate(label, (cost, attainment * 100), fontsize=6, xytext=(2, 2), textcoords="offset points")
    ax.axhline(95, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("pool cost ($/h)")
    ax.set_ylabel("overall SLO attainment (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _save(fig, path)
