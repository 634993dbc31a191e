"""``shunter traffic export``: the gateways' recorded traffic as a trace the simulator replays.

Every gateway writes one access-log line per request (``docs/observability.md``): when it ended,
its duration, tenant, tier, model, prompt tokens and generated tokens, never its text.
``export`` reads the gateways' access logs under ``--state-dir``/logs (``gateway*.access.jsonl``
and their rotated copies), keeps the inference requests that reached admission (a tenant, a model
and a prompt token count: a request refused before, such as a bad key, is not traffic a policy
could serve) that arrived in the last ``--since`` (of ``--model`` only, if given), and writes them
in Shunter's trace format (``simulator/trace_files.py``; JSONL: ``arrival_s`` from the first arrival, ``prompt_tokens``,
``output_tokens``, ``tenant``, ``tier``, ``model``), in arrival order. ``shunter sim ... --trace
FILE`` replays it. A request's arrival is its line's time minus its duration.
"""

from __future__ import annotations

import json
import time
from calendar import timegm
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.scale import parse_duration
from settings.paths import StackPaths

traffic_app = typer.Typer(help="The gateways' recorded traffic (access logs) as a simulator trace.",
                          no_args_is_help=True)


def _epoch_s(stamp: str) -> float:
    """``2026-12-03T11:49:00.123Z`` -> seconds since the epoch."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + (float(f"0.{fraction}") if fraction else 0.0)


def access_lines(logs_dir: Path) -> Iterator[dict[str, Any]]:
    """Every parsable line of the gateways' access logs (rotated copies included)."""
    for path in sorted(logs_dir.glob("gateway*.access.jsonl*")):
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash: the rest of the file is still good
                if isinstance(entry, dict):
                    yield entry


def trace_rows(entries: Iterable[dict[str, Any]], since_epoch_s: float, model: str | None = None
               ) -> list[dict[str, Any]]:
    """The trace rows of the requests (of ``model``, if given) that reached admission and arrived
    after ``since_epoch_s``."""
    arrivals = []
    for entry in entries:
        if not (entry.get("tenant") and entry.get("model") and isinstance(entry.get("tokens_in"), int)):
            continue
        if model is not None and entry["model"] != model:
            continue
        try:
            arrival = _epoch_s(str(entry["ts"])) - float(entry.get("duration_ms") or 0.0) / 1000.0
        except (KeyError, ValueError):
            continue
        if arrival >= since_epoch_s:
            arrivals.append((arrival, entry))
    arrivals.sort(key=lambda pair: pair[0])
    first = arrivals[0][0] if arrivals else 0.0
    return [{"arrival_s": round(arrival - first, 3), "prompt_tokens": entry["tokens_in"],
             "output_tokens": int(entry.get("tokens_out") or 0), "tenant": entry["tenant"],
             **({"tier": entry["tier"]} if entry.get("tier") else {}), "model": entry["model"]}
            for arrival, entry in arrivals]


@traffic_app.command("export")
def export(out: Annotated[Path, typer.Option(help="the trace file to write (JSONL)")],
           since: Annotated[str, typer.Option(help="how far back: 30m, 1h, 2d")] = "1h",
           model: Annotated[str | None, typer.Option(help="only this model's requests (the simulator "
                                                          "replays one LLM's traffic: --model chat)")] = None,
           state_dir: Annotated[Path, typer.Option(help="the stack's state dir (its logs/ folder)")]
           = StackPaths.state_dir) -> None:
    """Write the gateways' recorded traffic of the last SINCE as a simulator trace."""
    try:
        window_s = parse_duration(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from exc
    rows = trace_rows(access_lines(state_dir / "logs"), time.time() - window_s, model)
    if not rows:
        typer.echo(f"no recorded requests in the last {since} under {state_dir / 'logs'}", err=True)
        raise typer.Exit(1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    typer.echo(f"{len(rows)} requests over {rows[-1]['arrival_s']:.0f} s -> {out}")
