"""The ``shunter`` command: run the local stack, inspect it, operate the control plane, simulate.

This package sits on top of the others: it may import ``control`` and ``simulator``, which the
deployables never import from each other. Start-up is kept short (``python -m bench cli_startup``):
the sub-commands' modules (``cli.ops``, ``cli.scale``, ``cli.sim``, ``cli.kubernetes``,
``cli.tokens``) are imported only when one of their commands runs (``cli.lazy``), and the commands
here import the control plane's process code, httpx and the pydantic settings inside their bodies;
``tests/unit/cli/test_main.py`` checks that ``import cli.main`` loads none of them.

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

import typer
from rich.console import Console

from cli.lazy import LazyCommand, LazyGroup
from scheduling.policy import Policy
from settings.paths import StackPaths, admin_token


class ShunterGroup(LazyGroup):
    lazy = {
        "ab": LazyCommand("cli.ops:ab_app", "A/B tests between versions (pause, promote or roll back with "
                                            "`shunter rollout`)."),
        "audit": LazyCommand("cli.ops:audit", "The control plane's audit log, newest first."),
        "k8s": LazyCommand("cli.kubernetes:k8s_app", "Kubernetes manifests (deploy/kubernetes)."),
        "keys": LazyCommand("cli.ops:keys_app", "ed25519 keys that sign artifacts."),
        "observe": LazyCommand("cli.observe.render:observe_app", "Prometheus rules and Grafana dashboards "
                                                                 "(docs/observability.md)."),
        "models": LazyCommand("cli.ops:models_app", "Model versions in the registry: push signed artifacts, "
                                                    "list them."),
        "rollout": LazyCommand("cli.ops:rollout_app", "Canary rollouts: start, promote, pause, resume, roll back, "
                                                      "show status."),
        "scale": LazyCommand("cli.scale:scale_app", "Capacity: replicas per pool and model, their bounds and "
                                                    "overrides."),
        "sim": LazyCommand("cli.sim:sim_app", "Trace-driven simulator of GPU pools driving the scheduling core."),
        "top": LazyCommand("cli.top:top", "A live view of models, queues, tenants, workers, replicas and rollouts "
                                          "(Ctrl-C to leave)."),
        "tokens": LazyCommand("cli.tokens:tokens_app", "Operator tokens for the admin API, with roles (admin "
                                                       "only)."),
        "traffic": LazyCommand("cli.traffic:traffic_app", "The gateways' recorded traffic (access logs) as a "
                                                          "simulator trace."),
    }


app = typer.Typer(cls=ShunterGroup, help="Shunter: GPU inference serving — local stack and operator commands.",
                  no_args_is_help=True)
console = Console()

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
    from settings.gateway import load_gateway_settings

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
    from settings.gateway import load_gateway_settings

    settings = load_gateway_settings(stack.paths.gateway_file)
    token = settings.metrics_token_file
    return scrape_config(stack.metrics_urls(), stack.control_url, stack.paths.admin_token_file,
                         None if token is None else stack.paths.config_dir / token)


def _admin_get(control_url: str, path: str, token: str) -> list[dict[str, Any]]:
    import httpx

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
    from rich.table import Table

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
    from settings.tenants import hash_api_key

    console.print(hash_api_key(api_key))


if __name__ == "__main__":
    app()
