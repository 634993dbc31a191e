"""``python -m gateway``: serve the gateway with uvicorn (the local stack starts it this way).

The listening socket is opened with ``SO_REUSEPORT``, so several gateway processes can serve one
port (``shunter up --gateways N``): the kernel spreads new connections over them, and with a
shared state store (``gateway.yaml``) they act as one gateway. ``--direct-port`` adds a port of
this process's own, where control reaches it alone. ``metrics_listen`` in ``gateway.yaml`` adds
the address where ``/metrics`` is served instead of the API port.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from gateway.app import create_app
from scheduling.scheduler import Policy
from settings.gateway import load_gateway_settings
from settings.paths import StackPaths

BACKLOG = 2048


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket that other processes may bind too (``SO_REUSEPORT``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def main(
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8080,
    config_dir: Annotated[Path, typer.Option()] = StackPaths.config_dir,
    state_dir: Annotated[Path, typer.Option()] = StackPaths.state_dir,
    policy: Annotated[Policy | None, typer.Option(help="override scheduling.yaml's policy")] = None,
    control_url: Annotated[str | None, typer.Option(help="control API to follow for model versions and "
                                                         "traffic weights")] = None,
    direct_port: Annotated[int | None, typer.Option(help="also listen on this port of its own (on the "
                                                         "loopback), so this process can be reached alone")] = None,
) -> None:
    paths = StackPaths(config_dir=config_dir.resolve(), state_dir=state_dir.resolve())
    app = create_app(paths, policy=policy, control_url=control_url,
                     process_name=f"gateway-{direct_port if direct_port is not None else port}")
    # Keep-alive longer than the idle timeout of the load balancers in front (60 s for most): a
    # server that closes an idle connection first races the client's next request on it, which
    # then fails with a reset (seen at uvicorn's default of 5 s under load).
    config = uvicorn.Config(app, log_level="warning", access_log=False, loop="uvloop", http="httptools",
                            timeout_graceful_shutdown=10, timeout_keep_alive=75)
    sockets = [reuse_port_socket(host, port)]
    if direct_port is not None:
        sockets.append(reuse_port_socket("127.0.0.1", direct_port))
    metrics_address = load_gateway_settings(paths.gateway_file).metrics_address
    if metrics_address is not None:  # /metrics on an address of its own (gateway/metrics_access.py)
        sockets.append(reuse_port_socket(*metrics_address))
    uvicorn.Server(config).run(sockets=sockets)


if __name__ == "__main__":
    typer.run(main)
