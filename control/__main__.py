"""``python -m control``: the control service alone, for a cluster (Kubernetes mode).

It opens the control plane from ``--config-dir`` (``control.yaml`` must say ``mode: kubernetes``:
the local mode is ``shunter up``, which also starts the workers), renders and publishes every
live version to the S3 repository, then serves the admin API, runs the canary analysis and the
capacity controller (``control/capacity/cluster.py``: its desired replicas on ``/metrics`` are
what KEDA scales each pool by) until SIGTERM. The admin token is read from
``--state-dir``/``admin.token`` (a Secret mounted there). Pools' pods and gateway pods are found
through the cluster's DNS (``control/remote_workers.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from control.capacity.cluster import open_cluster_capacity
from control.control_plane import ControlPlane
from control.remote_workers import DnsResolver
from control.service import create_control_app
from settings.base import ConfigError
from settings.control import load_control_settings
from settings.paths import StackPaths
from settings.stack import load_stack_config

cli = typer.Typer(add_completion=False)


@cli.command()
def main(config_dir: Annotated[Path, typer.Option(help="folder with pools.yaml, models.yaml, control.yaml")],
         state_dir: Annotated[Path, typer.Option(help="folder with admin.token, keys/; verified copies go here")],
         repository_dir: Annotated[Path, typer.Option(help="scratch folder where control renders before "
                                                      "publishing")] = Path("/tmp/shunter-repository"),
         host: str = "0.0.0.0", port: int = 8081) -> None:
    paths = StackPaths(config_dir=config_dir.resolve(), state_dir=state_dir.resolve(),
                       repository=repository_dir.resolve())
    if load_control_settings(paths.control_file, paths.state_dir).mode != "kubernetes":
        raise ConfigError(f"{paths.control_file}: mode: kubernetes is needed to run control alone "
                          "(the local mode is `shunter up`)")
    token_file = paths.admin_token_file
    if not token_file.is_file() or not token_file.read_text().strip():
        raise ConfigError(f"{token_file}: the admin token is missing (mount the admin Secret there)")
    config = load_stack_config(paths.pools_file, paths.models_file)
    resolver = DnsResolver()
    plane = ControlPlane.open(paths, config, resolver=resolver)
    capacity = None
    try:
        pods, capacity = open_cluster_capacity(plane, resolver)
        plane.bootstrap(paths.artifacts)
        plane.start_analysis()
        if capacity is not None:
            capacity.start()
        app = create_control_app(config, None, token_file.read_text().strip(), plane, replicas=pods,
                                 capacity=capacity)
        uvicorn.run(app, host=host, port=port, log_level="info", lifespan="off")
    finally:
        if capacity is not None:
            capacity.stop()
        plane.close()


if __name__ == "__main__":
    cli()
