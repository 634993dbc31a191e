"""The ``shunter`` command: run the local stack, inspect it, operate the control plane, simulate.

This package sits on top of the others: it may import ``control`` and ``simulator``, which the
deployables never import from each other. Commands that run processes (``up``,
``build-artifacts``) import the control plane's process code only when they run, so an operator
command (``status``, ``models``, ``rollout``, ``hash-key``) loads the HTTP client and settings only.

``shunter up`` starts everything in the foreground until Ctrl-C / SIGTERM; ``shunter status``
shows workers, models and readiness from the control API; ``shunter render`` and
``shunter build-artifacts`` run the setup steps alone; ``shunter hash-key`` prints the at-rest
form of an API key for ``tenants.yaml``; ``shunter sim`` runs the trace-driven simulator
(``cli.sim``).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from cli.kubernetes import k8s_app
from cli.observe.render import observe_app
from cli.ops import ab_app, audit, keys_app, models_app, rollout_app
from cli.scale import scale_app
from cli.sim import sim_app
from cli.top import top
from cli.traffic import traffic_app
from scheduling.scheduler import Policy
from settings.gateway import load_gateway_settings
from settings.paths import StackPaths, admin_token
from settings.tenants import hash_api_key

app = typer.Typer(help="Shunter: GPU inference serving — local stack and operator commands.",
                  no_args_is_help=True)
console = Console()
app.add_typer(sim_app, name="sim")
app.add_typer(traffic_app, name="traffic")
app.add_typer(models_app, name="models")
app.add_typer(rollout_app, name="rollout")
app.add_typer(ab_app, name="ab")
app.add_typer(keys_app, name="keys")
app.add_typer(scale_app, name="scale")
app.add_typer(k8s_app, name="k8s")
app.add_typer(observe_app, name="observe")
app.command("top")(top)
app.command("audit")(audit)

ConfigDir = Annotated[Path, typer.Option(help="folder with pools.yaml, models.yaml, tenants.yaml")]
StateDir = Annotated[Path, typer.Option(help="folder for artifacts, logs and state")]


def _paths(config_dir: Path, state_dir: Path) -> StackPaths:
    return StackPaths(config_dir=config_dir.resolve(), state_dir=state_dir.resolve())


@app.command("build-artifacts")
def build_artifacts_command(config_dir: ConfigDir = StackPaths.config_dir,
                            state_dir: StateDir = StackPaths.state_dir) -> None:
    """Build missing model artifacts and render the Triton model repository."""
    from control.stack import prepare

    paths = _paths(config_dir, state_dir)
    prepare(paths, log=console.print)
    console.print(f"artifacts in {paths.artifacts}, repository in {paths.repository}")


@app.command()
def up(
    config_dir: ConfigDir = StackPaths.config_dir,
    state_dir: StateDir = StackPaths.state_dir,
    host: Annotated[str, typer.Option(help="gateway address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="gateway port")] = 8080,
    control_port: Annotated[int, typer.Option(help="control API port")] = 8081,
    policy: Annotated[Policy | None, typer.Option(help="scheduling policy; overrides scheduling.yaml "
                                                       "(fifo is the baseline)")] = None,
    gateways: Annotated[int, typer.Option(min=1, max=64, help="gateway processes on the gateway port; more "
                                                              "than one needs a shared state store "
                                                              "(gateway.yaml)")] = 1,
    observe: Annotated[bool, typer.Option(help="also start a Prometheus on the loopback that scrapes the stack "
                                               "and evaluates deploy/observability/rules")] = False,
    prometheus_port: Annotated[int, typer.Option(help="the local Prometheus' port (with --observe)")] = 9095,
) -> None:
    """Start Triton workers, the control service and the gateway; stop on Ctrl-C."""
    from control.prometheus import LocalPrometheus
    from control.stack import Listen, LocalStack

    paths = _paths(config_dir, state_dir)
    if gateways > 1 and not load_gateway_settings(config_dir / "gateway.yaml").shared:
        raise typer.BadParameter("several gateways need a shared state_store in gateway.yaml "
                                 "(e.g. redis://127.0.0.1:6379/0)", param_hint="--gateways")
    listen = Listen(gateway_host=host, gateway_port=port, control_port=control_port, policy=policy,
                    gateways=gateways)
    stack = LocalStack(paths, listen)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    prometheus = LocalPrometheus(prometheus_port, paths.state_dir) if observe else None
    with console.status("starting Triton workers, control and gateway…"):
        stack.start(log=console.print)
    if prometheus is not None:
        try:
            prometheus.start(stack_scrape_config(stack))
        except BaseException:
            stack.stop()
            raise
        console.print(f"Prometheus {prometheus.url} scrapes the stack (rules: deploy/observability/rules)")
    console.print(f"[bold green]Shunter is up[/]: gateway http://{host}:{port}/v1 "
                  f"(OpenAI) and http://{host}:{port}/v2 (KServe v2); "
                  f"control http://127.0.0.1:{control_port}/admin/v1; logs in {paths.logs}")
    console.print("Press Ctrl-C to stop.")
    try:
        while not stop.wait(1.0):
            supervisor = stack.gateway_supervisor
            if supervisor is not None and supervisor.gave_up is not None:
                console.print(f"[red]{supervisor.gave_up}; stopping[/]")
                break
    finally:
        with console.status("stopping…"):
            if prometheus is not None:
                prometheus.stop()
            stack.stop()
        console.print("stopped")


def stack_scrape_config(stack: Any) -> dict[str, object]:
    """The local Prometheus' configuration for a started ``LocalStack``."""
    from control.prometheus import scrape_config

    settings = load_gateway_settings(stack.paths.gateway_file)
    token = settings.metrics_token_file
    return scrape_config(stack.metrics_urls(), stack.control_url, stack.paths.admin_token_file,
                         None if token is None else stack.paths.config_dir / token)


def _admin_get(control_url: str, path: str, token: str) -> list[dict[str, Any]]:
    try:
        response = httpx.get(f"{control_url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=5.0)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        console.print(f"[red]control API at {control_url} not reachable: {exc}[/] (is `shunter up` running?)")
        raise typer.Exit(code=1) from exc
    rows: list[dict[str, Any]] = response.json()
    return rows


@app.command()
def status(
    state_dir: StateDir = StackPaths.state_dir,
    control_url: Annotated[str, typer.Option(help="control API base URL")] = "http://127.0.0.1:8081",
) -> None:
    """Show workers, their models and readiness, and the gateway processes."""
    token = admin_token(_paths(StackPaths.config_dir, state_dir))
    table = Table(title="Triton workers")
    for column in ("worker", "pool", "gpu", "region", "grpc", "pid", "alive", "restarts", "models"):
        table.add_column(column)
    for row in _admin_get(control_url, "/admin/v1/workers", token):
        models = ", ".join(f"{m}:{'READY' if ok else 'not ready'}" for m, ok in row["models"].items())
        table.add_row(row["name"], row["pool"], row["gpu_type"], row["region"], row["grpc"],
                      str(row["pid"]), "yes" if row["alive"] else "NO", str(row["restarts"]), models)
    console.print(table)
    gateways = Table(title="Gateways")
    for column in ("gateway", "pid", "alive", "address"):
        gateways.add_column(column)
    for row in _admin_get(control_url, "/admin/v1/gateways", token):
        gateways.add_row(str(row["index"]), str(row["pid"]), "yes" if row["alive"] else "NO", row["url"])
    console.print(gateways)


@app.command("hash-key")
def hash_key(api_key: str) -> None:
    """Print the sha256 form of an API key, as stored in tenants.yaml."""
    console.print(hash_api_key(api_key))


if __name__ == "__main__":
    app()
