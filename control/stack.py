"""The local stack: Triton workers, the control service and the gateway on one host.

``LocalStack.start()`` builds missing artifacts, opens the control plane (registry, store, keys),
which renders the live versions it holds into the model repository (the one render at start:
``prepare``, which renders the built artifacts directly, is for ``shunter build-artifacts``),
starts the workers (waiting for every model READY), the control API and the canary analysis in
threads, and the gateway as its own process following control's routing, then waits for the
gateway's ``/readyz``. A gateway process that dies is restarted with backoff, and left down after
repeated crashes (``gateway_supervisor``). ``stop()`` undoes it in reverse order: the gateway
first (no new traffic), then control, then the workers.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from control.assets.build import build_artifacts
from control.capacity.controller import CapacityController
from control.capacity.replicas import LiveAddresses, ReplicaSet
from control.control_plane import ControlPlane
from control.errors import ControlError
from control.gateway_supervisor import GatewaySupervisor
from control.redis_server import LocalRedis
from control.redis_server import answers as redis_answers
from control.repository import render_repository
from control.service import create_control_app
from control.supervisor import Supervisor
from control.triton_runtime import TritonRuntime, resolve_runtime
from scheduling.scheduler import Policy
from settings.access_log import open_access_log
from settings.capacity import load_capacity
from settings.gateway import load_gateway_settings
from settings.observability import load_observability
from settings.paths import StackPaths, admin_token
from settings.scheduling import load_scheduling
from settings.stack import StackConfig, load_stack_config


@dataclass(frozen=True)
class Listen:
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8080
    control_port: int = 8081
    policy: Policy | None = None
    gateways: int = 1  # gateway processes sharing gateway_port (SO_REUSEPORT)


class StackStartError(ControlError, RuntimeError):
    """A part of the stack did not come up; the message says which and where its log is."""


def load_config(paths: StackPaths) -> StackConfig:
    return load_stack_config(paths.pools_file, paths.models_file)


def build(paths: StackPaths, log: Callable[[str], None] = print) -> StackConfig:
    """Build missing artifacts; return the validated config."""
    config = load_config(paths)
    build_artifacts(config, paths.artifacts, log=log)
    return config


def prepare(paths: StackPaths, log: Callable[[str], None] = print) -> StackConfig:
    """Build missing artifacts and render the repository from them, for workers started without a
    control plane (``shunter build-artifacts``); return the validated config."""
    config = build(paths, log)
    render_repository(config, paths.artifacts, paths.repository, gpu_type=min(p.gpu_type for p in config.pools))
    return config


class LocalStack:
    def __init__(self, paths: StackPaths, listen: Listen) -> None:
        self.paths = paths
        self.listen = listen
        self.supervisor: Supervisor | None = None
        self._control: uvicorn.Server | None = None
        self._control_thread: threading.Thread | None = None
        self.gateway_supervisor: GatewaySupervisor | None = None
        self.redis: LocalRedis | None = None
        self.plane: ControlPlane | None = None
        self.replicas: ReplicaSet | None = None
        self.capacity: CapacityController | None = None
        # With several gateways on one port, each also listens on a port of its own, so that
        # control can reach every one (rollouts wait for each to apply new routing).
        self.direct_ports = [free_port() for _ in range(listen.gateways)] if listen.gateways > 1 else []

    @property
    def gateways(self) -> list[subprocess.Popen[bytes]]:
        """The gateway processes now (a restarted gateway replaces its predecessor)."""
        return self.gateway_supervisor.processes if self.gateway_supervisor is not None else []

    @property
    def gateway(self) -> subprocess.Popen[bytes] | None:
        """The first gateway process (the only one unless ``listen.gateways`` > 1)."""
        return self.gateways[0] if self.gateways else None

    @property
    def gateway_url(self) -> str:
        return f"http://{self.listen.gateway_host}:{self.listen.gateway_port}"

    @property
    def gateway_urls(self) -> list[str]:
        """An address of every gateway process (its own port when there are several)."""
        if not self.direct_ports:
            return [self.gateway_url]
        return [f"http://127.0.0.1:{port}" for port in self.direct_ports]

    def metrics_urls(self) -> list[str]:
        """Where control reads each gateway's ``/metrics``: its address, or ``metrics_listen``
        (gateway.yaml) when /metrics has an address of its own (one gateway only)."""
        address = load_gateway_settings(self.paths.gateway_file).metrics_address
        if address is None:
            return self.gateway_urls
        if self.listen.gateways > 1:
            raise StackStartError("metrics_listen gives /metrics one address, which several gateways would share; "
                                  "with --gateways > 1 protect /metrics with metrics_token_file instead")
        return [f"http://{address[0]}:{address[1]}"]

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.listen.control_port}"

    def start(self, log: Callable[[str], None] = print) -> None:
        config = build(self.paths, log)  # the control plane renders the repository, once
        runtime = resolve_runtime(config.triton, self.paths.state_dir)
        self.plane = ControlPlane.open(self.paths, config, self.metrics_urls())
        try:
            self.plane.bootstrap(self.paths.artifacts)
            self.supervisor = Supervisor(config, runtime, self.paths.repository, self.paths.logs)
            self.supervisor.start()
            self.plane.mark_served_ready()
            self._open_capacity(config, runtime)
            self._start_control(config)
            self._start_redis()
            self._start_gateways(log)
            self.plane.start_analysis()
            if self.capacity is not None:
                self.capacity.start()
        except BaseException:
            self.stop()
            raise

    def _open_capacity(self, config: StackConfig, runtime: TritonRuntime) -> None:
        """The replica set over the supervisor's workers and, when ``capacity.yaml`` controls some
        (pool, model), the capacity controller (started once the gateways are up)."""
        assert self.supervisor is not None and self.plane is not None
        capacity = load_capacity(self.paths.capacity_file, config, load_scheduling(self.paths.scheduling_file, config))
        settings = self.plane.settings.replicas
        deployer = self.plane.deployer
        self.replicas = ReplicaSet(config, capacity.slots, self.supervisor, runtime, self.paths.repository,
                                   self.paths.logs, settings, lambda model: deployer.served.get(model, frozenset()))
        deployer.workers = LiveAddresses(self.replicas)
        if settings.enabled and capacity.policy.targets:
            self.capacity = CapacityController(capacity, config, self.replicas, self.metrics_urls(),
                                               self.plane.registry, settings,
                                               metrics_headers=self.plane.rollouts.probe_headers)

    def _start_control(self, config: StackConfig) -> None:
        assert self.supervisor is not None
        observability = load_observability(self.paths.observability_file)
        access_log = open_access_log(observability.access_log, self.paths.logs / "control.access.jsonl")
        app = create_control_app(config, self.supervisor, admin_token(self.paths), self.plane, self.gateway_rows,
                                 self.replicas, self.capacity, access_log)
        server_config = uvicorn.Config(app, host="127.0.0.1", port=self.listen.control_port,
                                       log_level="warning", lifespan="off")
        self._control = uvicorn.Server(server_config)
        self._control_thread = threading.Thread(target=self._control.run, name="control-api",
                                                daemon=True)
        self._control_thread.start()

    def _start_redis(self) -> None:
        """Start redis-server for a loopback ``redis://`` state store that nothing answers yet."""
        settings = load_gateway_settings(self.paths.gateway_file)
        port = settings.local_redis_port
        if settings.start_redis and port is not None and not redis_answers(port):
            self.redis = LocalRedis(port, self.paths.state_dir)
            self.redis.start()

    def _start_gateways(self, log: Callable[[str], None] = print) -> None:
        """One gateway after another, each ready (on its own port, when there are several)
        before the next starts; each restarted when it dies (``GatewaySupervisor``)."""
        def start(index: int) -> subprocess.Popen[bytes]:
            direct = self.direct_ports[index] if self.direct_ports else None
            log_path = self.paths.logs / ("gateway.log" if index == 0 else f"gateway-{index}.log")
            return start_gateway(self.paths, self.listen, log_path, self.control_url, direct_port=direct)

        self.gateway_supervisor = GatewaySupervisor(start, self.listen.gateways, log=log)
        self.gateway_supervisor.start()

    def gateway_rows(self) -> list[dict[str, object]]:
        """Each gateway process, for ``shunter status``."""
        restarts = self.gateway_supervisor.restarts() if self.gateway_supervisor is not None else []
        return [{"index": i, "pid": process.pid, "alive": process.poll() is None, "url": url,
                 "restarts": restarts[i] if i < len(restarts) else 0}
                for i, (process, url) in enumerate(zip(self.gateways, self.gateway_urls, strict=False))]

    def stop(self) -> None:
        if self.capacity is not None:
            self.capacity.stop()
        if self.gateway_supervisor is not None:
            self.gateway_supervisor.stop(stop_process)
        if self.redis is not None:
            self.redis.stop()
        if self.plane is not None:
            self.plane.close()
        if self._control is not None:
            self._control.should_exit = True
            if self._control_thread is not None:
                self._control_thread.join(timeout=10)
        if self.replicas is not None:
            self.replicas.close()
        if self.supervisor is not None:
            self.supervisor.stop()


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_gateway(paths: StackPaths, listen: Listen, log_path: Path, control_url: str | None = None,
                  ready_timeout_s: float = 60.0, direct_port: int | None = None) -> subprocess.Popen[bytes]:
    """Start ``python -m gateway`` for ``paths`` on ``listen`` (following ``control_url``'s routing
    when given; also on ``direct_port`` of its own when given) and wait for its ``/readyz``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "--host", listen.gateway_host, "--port", str(listen.gateway_port),
             "--config-dir", str(paths.config_dir), "--state-dir", str(paths.state_dir),
             *(["--policy", listen.policy.value] if listen.policy else []),
             *(["--control-url", control_url] if control_url else []),
             *(["--direct-port", str(direct_port)] if direct_port is not None else [])],
            stdout=log_file, stderr=subprocess.STDOUT,
        )
    try:
        ready_url = (f"http://127.0.0.1:{direct_port}/readyz" if direct_port is not None
                     else f"http://{listen.gateway_host}:{listen.gateway_port}/readyz")
        wait_http_ok(ready_url, ready_timeout_s, process, log_path)
    except BaseException:
        stop_process(process)
        raise
    return process


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """SIGTERM, wait, then SIGKILL if it would not stop (a process we started)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def wait_http_ok(url: str, timeout_s: float, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``url`` until it answers 200; raise StackStartError if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise StackStartError(f"{url}: the process exited; see {log}")
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    raise StackStartError(f"{url} not ready after {timeout_s:.0f} s; see {log}")
