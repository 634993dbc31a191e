"""The real-stack fidelity replays side by side, as the Markdown tables of docs/simulation.md §4b.

    python -m bench studies.fidelity_report docs/sim/fidelity_real_run39 ... docs/sim/fidelity_real_run53
    python -m bench studies.fidelity_report --compare fidelity_real_320.json --compare fidelity_real_1500.json \
        docs/sim/fidelity_real_run44 ...

Each folder holds a replay simulated by ``bench.studies.fidelity_real simulate`` (``fidelity_real.json``,
the ``scheduling.yaml`` it ran with). One row per replay: the `cpu` profile's prefill speed, real
and simulated p50 / p99 TTFT at the profile's speed, the host's measured speed (whole run; range
of its windows) and the simulation at that speed window by window (``host_timed``), and per
request the median of simulated / real and how many are within ±25 %. ``--compare A --compare B``
sets two simulations of each replay side by side (``host_timed`` p50 / p99), for instance the same
replay under two gateway configs (``simulate --scheduling FILE --result NAME``: the same measured
host speed, other settings).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from simulator.replay_sim import TOLERANCE

app = typer.Typer(add_completion=False)
HEADER = ("| run | cpu profile (prefill tok/s) | real p50 / p99 TTFT (s) | simulated at the profile's speed: "
          "p50 / p99, error | host speed (engine busy / model): whole run; windows | simulated per window: "
          "p50 / p99, error | within ±25 %: profile / per window | per request, per window: simulated / real "
          "(median), within ±25 % |\n|---|---|---|---|---|---|---|---|")


def _pair(entry: dict[str, Any], errors: bool = True) -> str:
    text = f"{entry['sim_p50_s']:.3f} / {entry['sim_p99_s']:.2f}"
    return text + f", {100 * entry['p50_error']:+.1f} / {100 * entry['p99_error']:+.1f} %" if errors else text


def _yes(entry: dict[str, Any] | None) -> str:
    return "-" if entry is None else "yes" if entry["within_25_percent"] else "no"


def row(folder: Path) -> str:
    """The table row of one simulated replay (raise OSError / KeyError if it is not one)."""
    result = json.loads((folder / "fidelity_real.json").read_text())
    headline, timed = result["headline"], result["headline"].get("host_timed")
    whole = headline.get("host_calibrated")
    speed = yaml.safe_load((folder / "scheduling.yaml").read_text())["capacity_profiles"]["cpu"]["prefill_tokens_per_s"]
    real = headline["all"]
    cells = [folder.name.removeprefix("fidelity_real_run"), str(speed),
             f"{real['real_p50_s']:.3f} / {real['real_p99_s']:.2f}", _pair(real)]
    scales = [s for _, s in timed["window_scales"]] if timed else []
    cells.append(f"{whole['time_scale']:.2f}; " + (f"{min(scales):.2f}-{max(scales):.2f}" if scales else "-")
                 if whole else "-")
    cells += [_pair(timed) if timed else "-", f"{_yes(real)} / {_yes(timed)}"]
    ratios = [r["sim_host_timed_ttft_s"] / r["real_ttft_s"] for r in result["requests"]
              if r["real_ttft_s"] and r.get("sim_host_timed_ttft_s")]
    cells.append(f"{statistics.median(ratios):.2f}, {sum(abs(q - 1) <= TOLERANCE for q in ratios)} of {len(ratios)}"
                 if ratios else "-")
    return "| " + " | ".join(cells) + " |"


def versus_row(folder: Path, first: str, second: str) -> str:
    """``host_timed`` p50 / p99 of two simulations of one replay (files ``first`` and ``second``)."""
    a, b = (json.loads((folder / name).read_text())["headline"]["host_timed"] for name in (first, second))
    return (f"| {folder.name.removeprefix('fidelity_real_run')} | {_pair(a, False)} | {_pair(b, False)} "
            f"| {a['sim_p50_s'] / b['sim_p50_s']:.3f} / {a['sim_p99_s'] / b['sim_p99_s']:.3f} |")


@app.command()
def main(folders: Annotated[list[Path], typer.Argument(help="run folders, in the order of the rows")],
         compare: Annotated[list[str] | None, typer.Option(
             help="twice: two result files in each folder, set side by side")] = None) -> None:
    if not compare:
        print("\n".join([HEADER, *(row(f) for f in folders)]))
        return
    if len(compare) != 2:
        raise typer.BadParameter("give --compare exactly twice")
    first, second = compare
    print(f"| run | host_timed p50 / p99 (s): {first} | {second} | ratio p50 / p99 |\n|---|---|---|---|")
    print("\n".join(versus_row(f, first, second) for f in folders))

