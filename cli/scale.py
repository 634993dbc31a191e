"""``shunter scale``: the capacity controller, from the operator's side (registered by ``cli.main``).

``scale status`` (a table per pool x model, ``--json`` for scripts): bounds, desired / ready /
starting / draining replicas, the signals behind the last decision, the decision with its reason
and numbers, the cap holding it back and any live override. ``scale set MODEL --pool P --min N
--max M`` changes the warm minimum and the maximum; ``scale override MODEL --pool P --replicas N
--for 30m --reason "..."`` sets an expiring count above the caps. Both are audited under the
operator's token name. Malformed arguments are usage errors (exit 2); control's refusals are printed with their code
(exit 1), as in ``cli.ops``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.admin_client import DEFAULT_CONTROL_URL
from cli.ops import ControlUrl, Reason, StateDir, _client, operator_errors
from cli.tables import NONE, when
from settings.paths import StackPaths

scale_app = typer.Typer(help="Capacity: replicas per pool and model, their bounds and overrides.",
                        no_args_is_help=True)
console = Console()

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
ModelArg = Annotated[str, typer.Argument(help="model name")]
Pool = Annotated[str, typer.Option("--pool", help="pool name (pools.yaml)")]


def parse_duration(text: str) -> float:
    """``"30m"``, ``"1h30m"``, ``"90s"``, ``"2d"`` -> seconds (> 0); ValueError saying what is wrong."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a duration like 30m, 1h30m, 90s or 2d")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise ValueError(f"{text!r}: the duration must be longer than 0 s")
    return float(total)


@scale_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="print the JSON document")] = False,
           control_url: ControlUrl = DEFAULT_CONTROL_URL, state_dir: StateDir = StackPaths.state_dir) -> None:
    """Replicas per pool and model, the signals and the last decision behind them."""
    with operator_errors(), _client(state_dir, control_url) as client:
        document = client.capacity_status()
    if as_json:
        typer.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for renderable in status_renderables(document):
        console.print(renderable)


@scale_app.command("set")
def set_bounds(model: ModelArg, pool: Pool,
               min_replicas: Annotated[int, typer.Option("--min", min=0, help="warm minimum")],
               max_replicas: Annotated[int, typer.Option("--max", min=0, help="maximum")],
               reason: Reason = "", control_url: ControlUrl = DEFAULT_CONTROL_URL,
               state_dir: StateDir = StackPaths.state_dir) -> None:
    """Set the warm minimum and the maximum of MODEL on a pool."""
    if min_replicas > max_replicas:
        raise typer.BadParameter(f"--min {min_replicas} is above --max {max_replicas}", param_hint="--min")
    with operator_errors(), _client(state_dir, control_url) as client:
        client.set_capacity(model, pool, min_replicas, max_replicas, reason)
    console.print(f"{escape(model)} on {escape(pool)}: min {min_replicas}, max {max_replicas}")


@scale_app.command("override")
def override(model: ModelArg, pool: Pool,
             replicas: Annotated[int, typer.Option("--replicas", min=0, help="replicas while it lasts")],
             duration: Annotated[str, typer.Option("--for", help="how long: 30m, 1h30m, 90s, 2d")],
             reason: Annotated[str, typer.Option(help="why, for the audit log (required)")],
             control_url: ControlUrl = DEFAULT_CONTROL_URL, state_dir: StateDir = StackPaths.state_dir) -> None:
    """Run REPLICAS of MODEL on a pool for a while, above its caps (audited)."""
    try:
        for_s = parse_duration(duration)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--for") from exc
    if not reason.strip():
        raise typer.BadParameter("say why (it goes into the audit log)", param_hint="--reason")
    with operator_errors(), _client(state_dir, control_url) as client:
        document = client.override_capacity(model, pool, replicas, for_s, reason)
    rows = [r for r in document.get("rows", []) if r.get("model") == model and r.get("pool") == pool]
    row: dict[str, Any] = rows[0] if rows else {}
    expires = (row.get("override") or {}).get("expires_at_s")
    console.print(f"{escape(model)} on {escape(pool)}: {replicas} replicas until {when(expires)}")


def status_renderables(document: dict[str, Any]) -> list[Any]:
    """The status table and, per row, its signals and last decision."""
    table = Table(title=f"Capacity (period {document.get('period_s', NONE)} s, last tick "
                        f"{when(document.get('last_tick_s'))})")
    for column in ("pool", "model", "min..max", "desired", "ready", "starting", "draining", "cap"):
        table.add_column(column)
    for row in document.get("rows", []):
        table.add_row(escape(row["pool"]), escape(row["model"]), f"{row['min_replicas']}..{row['max_replicas']}",
                      str(row["desired"]), str(row["ready"]), str(row["starting"]), str(row["draining"]),
                      escape(str(row.get("cap") or NONE)))
    out: list[Any] = [table]
    for row in document.get("rows", []):
        out.append(_details(row))
    cold = document.get("cold_start_s") or {}
    if cold:
        out.append("predicted cold start: " + ", ".join(f"{m} {s:.1f} s" for m, s in sorted(cold.items())))
    if document.get("gateway_error"):
        out.append(f"[yellow]gateways: {escape(document['gateway_error'])}[/]")
    for error in document.get("errors", []):
        out.append(f"[red]{escape(error)}[/]")
    return out


def _details(row: dict[str, Any]) -> str:
    signals = row.get("signals") or {}
    decision = row.get("last_decision") or {}
    shown = ("arriving_prompt_tokens_per_s", "arriving_output_tokens_per_s", "pending_prompt_tokens",
             "pending_output_tokens", "in_flight_tokens", "queue_wait_p95_s", "ttft_p95_s", "burn_rate_short",
             "burn_rate_long", "held_requests", "idle_s", "kv_used_fraction")
    parts = [f"{name}={_number(signals.get(name))}" for name in shown if name in signals]
    numbers = ", ".join(f"{k}={_number(v)}" for k, v in sorted((decision.get("numbers") or {}).items()))
    lines = [f"[bold]{escape(row['pool'])}/{escape(row['model'])}[/] signals: {escape(', '.join(parts) or NONE)}",
             f"  last decision: {escape(str(decision.get('action', NONE)))} to {decision.get('desired', NONE)} "
             f"because {escape(str(decision.get('reason', NONE)))} (recommended {decision.get('recommended', NONE)}, "
             f"at {when(decision.get('at_s'))}); numbers: {escape(numbers or NONE)}"]
    if row.get("capped_by_budget"):
        lines.append(f"  [yellow]capped by {escape(str(row.get('cap')))}[/]: the signals ask for more")
    if row.get("override"):
        o = row["override"]
        lines.append(f"  override: {o['replicas']} replicas until {when(o['expires_at_s'])} by {escape(o['actor'])}: "
                     f"{escape(o['reason'])}")
    if row.get("last_cold_start_s") is not None:
        lines.append(f"  last cold start: {row['last_cold_start_s']:.1f} s")
    return "\n".join(lines)


def _number(value: Any) -> str:
    if value is None:
        return NONE
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
