"""``shunter sim``: the trace-driven simulator's commands (registered by ``cli.main``).

Each command writes JSON, Markdown and PNG files under ``--out`` and prints its headline figures;
``shunter sim all`` runs every experiment of ``docs/simulation.md`` (and ``autoscale``, of
``docs/autoscaling.md``). The simulator's experiments
(``simulator.suite``, with numpy, scipy and matplotlib behind it) are imported when a command runs,
so other ``shunter`` commands do not load them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulator.workloads import DEFAULT_TRACES_DIR

if TYPE_CHECKING:
    from types import ModuleType

sim_app = typer.Typer(help="Trace-driven simulator of GPU pools driving the scheduling core.", no_args_is_help=True)
console = Console()

Out = Annotated[Path, typer.Option(help="folder for the JSON, Markdown and PNG results")]
Traces = Annotated[Path, typer.Option(help="folder with the traces (default: the repository's data/traces)")]
MIN_TRACE_REQUESTS = 50


def _check_trace(trace: str) -> str:
    """A trace FILE is read and checked before anything is simulated (a bad one is a usage error)."""
    from simulator.trace_files import TraceFormatError, read_trace
    from simulator.workloads import AZURE

    if trace in AZURE:
        return trace
    try:
        records = read_trace(Path(trace))
    except TraceFormatError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if len(records) < MIN_TRACE_REQUESTS or records[-1].arrival_s <= 0:
        raise typer.BadParameter(f"{trace}: {len(records)} requests over {records[-1].arrival_s:.1f} s is too "
                                 "short: the experiments scale a trace against the pool's measured capacity, which "
                                 f"needs at least {MIN_TRACE_REQUESTS} requests over some time")
    return trace


Trace = Annotated[str, typer.Option(callback=_check_trace,
                                    help="a shipped trace (conv, code) or a trace FILE: Shunter's JSONL/CSV, the "
                                         "Azure CSV or Mooncake's JSONL (docs/simulation.md)")]
Seed = Annotated[int, typer.Option(help="seed of every random draw")]
Pool = Annotated[str, typer.Option(help="GPU mix, e.g. h100:16 or a10:8,a100-80:2")]
DEFAULT_OUT = Path("var/sim")


@contextmanager
def _progress(total: int, title: str) -> Iterator[Callable[[str], None]]:
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(title, total=total)
        started = [False]

        def on_run(label: str) -> None:
            if started[0]:
                progress.advance(task)
            started[0] = True
            progress.update(task, description=f"{title}: {label}")

        yield on_run
        progress.update(task, completed=total, description=f"{title}: done")


def _suite() -> ModuleType:
    from simulator import suite

    return suite


def _show(name: str, headline: dict[str, Any]) -> None:
    from simulator.report import to_data

    console.print(f"[bold]{name}[/bold]")
    console.print_json(json.dumps(to_data(headline), sort_keys=True))


@sim_app.command()
def overload(out: Out = DEFAULT_OUT, pool: Pool = "h100:16", load: float = 1.5, trace: Trace = "conv",
             traces_dir: Traces = DEFAULT_TRACES_DIR, seed: Seed = 0) -> None:
    """Every policy on the whole trace at LOAD x the pool's capacity (proof target 1)."""
    suite = _suite()
    with _progress(1 + len(suite.ALL_POLICIES), "overload") as on_run:
        headline = suite.overload(out, pool, load, trace, traces_dir, seed=seed, on_run=on_run)
    _show("overload", {k: v for k, v in headline.items()})


@sim_app.command("sweep")
def sweep_command(out: Out = DEFAULT_OUT, pool: Pool = "h100:16", loads: str = "0.5,0.75,1,1.25,1.5,2",
                  window_s: Annotated[float | None, typer.Option(help="first seconds of the trace only")] = None,
                  trace: Trace = "conv", traces_dir: Traces = DEFAULT_TRACES_DIR, seed: Seed = 0) -> None:
    """Attainment versus load per policy, and each policy's DistServe goodput."""
    suite = _suite()
    values = [float(x) for x in loads.split(",")]
    with _progress(1 + len(values) * len(suite.SWEEP_POLICIES), "sweep") as on_run:
        headline = suite.load_sweep(out, pool, values, trace=trace, window_s=window_s, traces_dir=traces_dir,
                                    seed=seed, on_run=on_run)
    _show("sweep", headline)


@sim_app.command()
def noisy(out: Out = DEFAULT_OUT, pool: Pool = "a100-80:2", window_s: float = 1200.0, burst: float = 10.0,
          traces_dir: Traces = DEFAULT_TRACES_DIR, seed: Seed = 0) -> None:
    """One tenant bursts to BURST x its quota: the quiet tenants' p99 TTFT (proof target 2)."""
    suite = _suite()
    with _progress(3, "noisy tenant") as on_run:
        headline = suite.noisy(out, pool, window_s, burst, traces_dir, seed=seed, on_run=on_run)
    _show("noisy", {"pool": headline["pool"], "ratio": headline["ratio"]})


@sim_app.command()
def plan(out: Out = DEFAULT_OUT, window_s: float = 600.0, scale: float = 4.0, trace: Trace = "conv",
         policy: str = "shunter", max_evaluations: int = 40, traces_dir: Traces = DEFAULT_TRACES_DIR,
         seed: Seed = 0) -> None:
    """Cheapest A10 / A100 / H100 / H200 mix that meets the SLO targets (proof target 3)."""
    suite = _suite()
    with _progress(max_evaluations, "pool planning") as on_run:
        headline = suite.plan(out, window_s, scale, trace, policy, max_evaluations, traces_dir, seed, on_run)
    _show("plan", {k: headline[k] for k in ("offered_rps", "best_single", "best_mix", "savings")})


@sim_app.command()
def fidelity(out: Out = DEFAULT_OUT) -> None:
    """The LLM worker model against the published points it was calibrated on (proof target 4)."""
    suite = _suite()
    _show("fidelity", suite.fidelity(out))


@sim_app.command()
def speed(out: Out = DEFAULT_OUT, pool: Pool = "h100:16", policy: str = "shunter",
          traces_dir: Traces = DEFAULT_TRACES_DIR) -> None:
    """CPU time to simulate one hour of the conversation trace (proof target 5)."""
    suite = _suite()
    with _progress(1, "speed") as on_run:
        headline = suite.speed(out, pool, policy, traces_dir, on_run)
    _show("speed", headline)


@sim_app.command()
def autoscale(out: Out = DEFAULT_OUT, gpu: Annotated[str, typer.Option(help="GPU type of the pool")] = "a10",
              day_s: Annotated[float, typer.Option(min=600, help="simulated seconds that play the 24 h day")] = 7200.0,
              peak_replicas: Annotated[int, typer.Option(min=1, max=64, help="replicas the diurnal peak needs")] = 8,
              traces_dir: Traces = DEFAULT_TRACES_DIR, seed: Seed = 0,
              jobs: Annotated[int, typer.Option(min=1, max=64, help="policies simulated at once (processes)")] = 2
              ) -> None:
    """One day with a 10x diurnal swing of work, a 3x spike and a drifting mix: static peak, static
    mean, request-rate HPA (swept targets), shunter."""
    from simulator.perf.hardware import GPUS

    if gpu not in GPUS:
        raise typer.BadParameter(f"unknown GPU type {gpu!r}; known: {', '.join(GPUS)}", param_hint="--gpu")
    suite = _suite()
    with _progress(8, "autoscale") as on_run:
        headline = suite.autoscale(out, gpu, day_s, peak_replicas, traces_dir, seed, on_run, jobs)
    _show("autoscale", {k: v for k, v in headline.items() if k not in ("policies", "spec")})


@sim_app.command("all")
def all_command(out: Out = DEFAULT_OUT, traces_dir: Traces = DEFAULT_TRACES_DIR, seed: Seed = 0) -> None:
    """Every experiment with its default arguments (several minutes on one core)."""
    fidelity(out)
    speed(out, traces_dir=traces_dir)
    overload(out, traces_dir=traces_dir, seed=seed)
    noisy(out, traces_dir=traces_dir, seed=seed)
    plan(out, traces_dir=traces_dir, seed=seed)
    sweep_command(out, traces_dir=traces_dir, seed=seed)
    autoscale(out, traces_dir=traces_dir, seed=seed)
