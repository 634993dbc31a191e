"""``python -m gateway``: serve the gateway with uvicorn (the local stack starts it this way)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from gateway.app import create_app
from scheduling.scheduler import Policy
from settings.paths import StackPaths


def main(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8080,
    config_dir: Annotated[Path, typer.Option()] = StackPaths.config_dir,
    state_dir: Annotated[Path, typer.Option()] = StackPaths.state_dir,
    policy: Annotated[Policy | None, typer.Option(help="override scheduling.yaml's policy")] = None,
    control_url: Annotated[str | None, typer.Option(help="control API to follow for model versions and "
                                                         "traffic weights")] = None,
) -> None:
    app = create_app(StackPaths(config_dir=config_dir.resolve(), state_dir=state_dir.resolve()), policy=policy,
                     control_url=control_url)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                loop="uvloop", http="httptools", timeout_graceful_shutdown=10)


if __name__ == "__main__":
    typer.run(main)
