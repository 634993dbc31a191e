"""The stack the benchmark measures: a private one on its own ports, or one already running.

``bench_stack(options)`` is a context manager yielding ``Endpoints``. By default it writes a
config dir (``models.yaml``, ``tenants.yaml``, ``scheduling.yaml`` and ``gateway.yaml`` from the
project's ``config/``, with response caches off and tenant quotas lifted, and ``pools.yaml``
identical line for line except that the first pool's ``base_port`` becomes
``options.base_port``, the next pool's ``base_port + 100`` and so on), starts
``control.stack.LocalStack`` on the bench ports with the project's ``var/`` as state dir (so the
built artifacts are reused) and its own model repository, and stops it on exit, whatever
happened inside. Options of the stack's shape: ``gateways`` processes on the one port, the
``state_store`` they share (replacing ``gateway.yaml``'s; a loopback ``redis://`` store is started
by the stack), ``models`` (every pool's ``models`` list filtered to these) and ``quotas`` (the
tenants, by name, that keep the quotas given; every other tenant's are lifted). With
``options.use_running`` it starts nothing and yields the given URLs. With
``options.isolation`` the chat engine runs with that many threads and, once the stack is ready, its
stub is pinned to a core of its own (``bench.cpu.EngineIsolation``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import httpx
import typer
import yaml

from bench.cpu import EngineIsolation
from control.stack import Listen, LocalStack, load_config
from settings.paths import PROJECT_ROOT, StackPaths
from settings.workers import worker_addresses

BENCH_RESULTS = PROJECT_ROOT / "bench" / "results"
_BASE_PORT = re.compile(r"^(\s*base_port:\s*)\d+", re.MULTILINE)
_MODELS = re.compile(r"^(\s*models:\s*)\[([^\]]*)\]", re.MULTILINE)
IsolateEngine = Annotated[bool, typer.Option(
    help="Run the chat engine with one thread on the last CPU, alone; the rest of the stack and the "
         "bench on the other CPUs (bench.cpu.EngineIsolation). Fit, served terms and replays of one "
         "fidelity check must all use the same setting.")]


def isolation_if(isolate_engine: bool) -> EngineIsolation | None:
    """The isolation an ``--isolate-engine`` flag asks for."""
    return EngineIsolation.last_cpu() if isolate_engine else None


@dataclass(frozen=True)
class StackOptions:
    use_running: bool = False
    gateway_url: str = "http://127.0.0.1:18080"
    triton_grpc: str = "127.0.0.1:18101"
    triton_http: str = "127.0.0.1:18100"
    gateway_port: int = 18080
    control_port: int = 18081
    base_port: int = 18100
    config_dir: Path = BENCH_RESULTS / "config"
    repository: Path = PROJECT_ROOT / "var" / "bench_repository"
    state_dir: Path = PROJECT_ROOT / "var"
    isolation: EngineIsolation | None = None
    scheduling_file: Path | None = None  # the gateway's scheduling.yaml; None: the project's
    gateways: int = 1  # gateway processes sharing gateway_port
    state_store: str | None = None  # gateway.yaml's state_store; None: the project's
    models: tuple[str, ...] | None = None  # serve only these; None: every pool's models
    quotas: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # tenant -> quotas kept


@contextlib.contextmanager
def private_stack_options(isolation: EngineIsolation | None = None,
                          scheduling_file: Path | None = None) -> Iterator[StackOptions]:
    """Options for a private stack whose config, repository and state live in a temporary folder
    (removed afterwards); the built artifacts are linked into its state, not copied."""
    with tempfile.TemporaryDirectory(prefix="shunter-bench-") as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        (state / "artifacts").symlink_to(StackPaths().artifacts.resolve())
        yield StackOptions(config_dir=Path(tmp) / "config", repository=Path(tmp) / "repository", state_dir=state,
                           isolation=isolation, scheduling_file=scheduling_file)


@dataclass(frozen=True)
class Endpoints:
    """Where to send traffic: the gateway's base URL and one Triton worker (gRPC and HTTP)."""

    gateway_url: str
    triton_grpc: str
    triton_http: str
    started_here: bool
    gateway_pid: int | None = None
    triton_pid: int | None = None
    triton_metrics: str | None = None  # host:port of the worker's Prometheus metrics (a stack started here)
    gateway_pids: tuple[int, ...] = ()  # every gateway process (a stack started here)
    redis_pid: int | None = None  # the redis-server the stack started for its state store, if any


def write_config(source: Path, target: Path, base_port: int, isolation: EngineIsolation | None = None,
                 scheduling_file: Path | None = None, *, state_store: str | None = None,
                 models: tuple[str, ...] | None = None,
                 quotas: Mapping[str, Mapping[str, float]] | None = None) -> None:
    """Copy ``source``'s models, tenants, scheduling (``scheduling_file`` instead, if given) and
    gateway settings (``state_store`` replacing its store, if given) into ``target`` with every
    response cache off (the benchmark repeats its inputs) and no tenant quotas (it measures how
    fast the serving path is, not a tenant's limits) except the ``quotas`` given by tenant name;
    rewrite pools onto ``base_port`` (serving only ``models``, if given); with ``isolation``, set
    its model's ``n_threads``."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(scheduling_file or source / "scheduling.yaml", target / "scheduling.yaml")
    _write_gateway_settings(source / "gateway.yaml", target / "gateway.yaml", state_store)
    kept = dict(quotas or {})
    tenants = yaml.safe_load((source / "tenants.yaml").read_text())
    for tenant in tenants["tenants"]:
        tenant["quotas"] = dict(kept.pop(tenant["name"], {}))
    if kept:
        raise ValueError(f"{source / 'tenants.yaml'}: no tenant {sorted(kept)} to keep quotas for")
    (target / "tenants.yaml").write_text(yaml.safe_dump(tenants, sort_keys=False))
    catalog = yaml.safe_load((source / "models.yaml").read_text())
    for model in catalog["models"]:
        model["cache_entries"] = 0
        if isolation is not None and model["name"] == isolation.model:
            model["parameters"] = {**model.get("parameters", {}), "n_threads": str(isolation.threads)}
    (target / "models.yaml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    index = iter(range(1000))
    text, count = _BASE_PORT.subn(lambda m: f"{m.group(1)}{base_port + 100 * next(index)}",
                                  (source / "pools.yaml").read_text())
    if count == 0:
        raise ValueError(f"{source / 'pools.yaml'}: no base_port to rewrite")
    if models is not None:
        text = serve_only(text, models)
    (target / "pools.yaml").write_text(text)


def serve_only(pools_text: str, models: tuple[str, ...]) -> str:
    """``pools.yaml``'s text with each pool's ``models: [...]`` list filtered to ``models``;
    ``ValueError`` when no pool serves any of them."""
    served: set[str] = set()

    def keep(match: re.Match[str]) -> str:
        names = [name.strip() for name in match.group(2).split(",") if name.strip() in models]
        served.update(names)
        return f"{match.group(1)}[{', '.join(names)}]"

    text = _MODELS.sub(keep, pools_text)
    if not served:
        raise ValueError(f"no pool serves any of {list(models)}")
    return text


def _write_gateway_settings(source: Path, target: Path, state_store: str | None) -> None:
    """``source`` (the gateway settings; absent: the defaults) with ``state_store``, if given."""
    settings = yaml.safe_load(source.read_text()) if source.exists() else None
    settings = settings or {}
    if state_store is not None:
        settings["state_store"] = state_store
    target.write_text(yaml.safe_dump(settings, sort_keys=False))


def check_running(options: StackOptions, timeout_s: float = 5.0) -> None:
    """Raise ``RuntimeError`` unless the gateway and the Triton worker (HTTP) answer ready."""
    for url in (f"{options.gateway_url}/readyz", f"http://{options.triton_http}/v2/health/ready"):
        try:
            status = httpx.get(url, timeout=timeout_s).status_code
        except httpx.HTTPError as exc:
            raise RuntimeError(f"{url}: {exc}") from exc
        if status != 200:
            raise RuntimeError(f"{url}: HTTP {status}; is the stack running and ready?")


@contextlib.contextmanager
def bench_stack(options: StackOptions, log: Callable[[str], None] = print) -> Iterator[Endpoints]:
    """See the module docstring."""
    if options.use_running:
        check_running(options)
        yield Endpoints(options.gateway_url, options.triton_grpc, options.triton_http, False)
        return
    write_config(PROJECT_ROOT / "config", options.config_dir, options.base_port, options.isolation,
                 options.scheduling_file, state_store=options.state_store, models=options.models,
                 quotas=options.quotas)
    paths = StackPaths(config_dir=options.config_dir, state_dir=options.state_dir,
                       repository=options.repository)
    worker = worker_addresses(load_config(paths))[0]
    listen = Listen(gateway_host="127.0.0.1", gateway_port=options.gateway_port,
                    control_port=options.control_port, gateways=options.gateways)
    stack = LocalStack(paths, listen)
    say = log if callable(log) else print
    try:
        say(f"starting the bench stack: gateway :{options.gateway_port}, workers from :{options.base_port}")
        stack.start(log=log)
        gateway_pid = stack.gateway.pid if stack.gateway is not None else None
        process = stack.supervisor.workers[0].process if stack.supervisor is not None else None
        if options.isolation is not None:
            if process is None:
                raise RuntimeError("engine isolation needs the Triton worker this harness started")
            say(f"engine isolation {options.isolation.to_json()}: threads pinned "
                f"{options.isolation.pin_stack(process.pid, gateway_pid)}")
        yield Endpoints(f"http://127.0.0.1:{options.gateway_port}",
                        f"{worker.host}:{worker.grpc_port}", f"{worker.host}:{worker.http_port}", True,
                        gateway_pid, process.pid if process is not None else None,
                        f"{worker.host}:{worker.metrics_port}", tuple(p.pid for p in stack.gateways),
                        stack.redis.process.pid if stack.redis is not None and stack.redis.process else None)
    finally:
        stack.stop()
        say("bench stack stopped")
