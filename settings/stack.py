"""Typed, validated configuration of the serving stack, read once at the edge.

Two YAML files describe a deployment:

* ``pools.yaml`` — where models run: Triton launch settings and pools of workers, each pool
  with a GPU type, a region, a worker count, the models it serves and the first port of its
  workers (worker ``i`` listens on ``base_port + 3*i`` (HTTP), ``+1`` (gRPC), ``+2`` (metrics)).
* ``models.yaml`` — what runs: each served model's workload kind, version and batching settings,
  from which the Triton ``config.pbtxt`` is rendered.

Everything downstream (renderer, supervisor, gateway) takes these objects, never the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from settings.base import ConfigError, StrictModel, read_yaml
from settings.kinds import WorkloadKind as WorkloadKind  # re-exported: its home is settings.kinds


class QueuePolicy(StrictModel):
    """Triton's per-model queue policy: a shallow bound so the gateway holds the backlog."""

    max_queue_size: Annotated[int, Field(ge=0)] = 64
    default_timeout_us: Annotated[int, Field(ge=0)] = 0
    reject_on_timeout: bool = True


class Batching(StrictModel):
    """Per-model batching settings rendered into ``config.pbtxt``."""

    max_batch_size: Annotated[int, Field(ge=0, le=4096)] = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    priority_levels: Annotated[int, Field(ge=0, le=8)] = 3
    default_priority_level: Annotated[int, Field(ge=0, le=8)] = 2
    queue: QueuePolicy = QueuePolicy()

    @model_validator(mode="after")
    def _consistent(self) -> Batching:
        for size in self.preferred_batch_sizes:
            if not 0 < size <= self.max_batch_size:
                raise ValueError(f"preferred batch size {size} not in 1..max_batch_size")
        if self.priority_levels and not 0 < self.default_priority_level <= self.priority_levels:
            raise ValueError("default_priority_level must be in 1..priority_levels")
        return self


class SamplingDefaults(StrictModel):
    """Recommended sampling of an LLM, applied by the gateway to the fields a request leaves out.
    A field left None here falls back to the artifact's generation config, then to the OpenAI
    default (temperature 1, top_p 1, no top_k)."""

    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None

    def over(self, base: SamplingDefaults) -> SamplingDefaults:
        """These defaults, with ``base``'s where this one leaves a field None."""
        return SamplingDefaults(**{name: getattr(self, name) if getattr(self, name) is not None else getattr(base, name)
                                   for name in SamplingDefaults.model_fields})


class ModelSpec(StrictModel):
    """One served model: its kind, the version served, batching and engine parameters."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
    kind: WorkloadKind
    version: Annotated[int, Field(ge=1)] = 1
    instances: Annotated[int, Field(ge=1, le=16)] = 1
    batching: Batching = Batching()
    context_tokens: Annotated[int, Field(ge=0)] = 0
    default_max_tokens: Annotated[int, Field(ge=1)] = 256
    token_cost_factor: Annotated[float, Field(gt=0)] = 1.0
    cache_entries: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    warmup: bool = True
    # LLMs: sampling defaults over the artifact's generation config (gateway/sampling_defaults.py)
    sampling: SamplingDefaults = SamplingDefaults()
    parameters: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _llm_needs_context(self) -> ModelSpec:
        if self.kind is WorkloadKind.LLM and self.context_tokens <= 0:
            raise ValueError(f"model {self.name}: an llm needs context_tokens > 0")
        return self


class PoolSpec(StrictModel):
    """A group of identical Triton workers: one GPU type, one region."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
    gpu_type: str = "cpu"
    region: str = "local"
    workers: Annotated[int, Field(ge=1, le=64)] = 1
    models: tuple[str, ...]
    profile: str | None = None
    host: str = "127.0.0.1"
    base_port: Annotated[int, Field(ge=1024, le=65000)] = 8100
    # static: ``workers`` processes on ``host`` (base_port + 3*i). dns: one worker per address that
    # ``host`` (a Kubernetes headless Service) resolves to, re-resolved while running, all on base_port.
    discovery: Literal["static", "dns"] = "static"

    @property
    def profile_name(self) -> str:
        """The capacity profile (scheduling.yaml) of this pool's workers; default its GPU type."""
        return self.profile or self.gpu_type

    def worker_ports(self, index: int) -> tuple[int, int, int]:
        """(http, grpc, metrics) ports of worker ``index`` in this pool."""
        first = self.base_port + 3 * index
        return first, first + 1, first + 2


class TritonSettings(StrictModel):
    """How workers are launched; ``binary`` empty means the pytriton wheel's tritonserver."""

    binary: str = ""
    ready_timeout_s: Annotated[float, Field(gt=0)] = 180.0
    exit_timeout_s: Annotated[int, Field(ge=1)] = 10
    restart_backoff_s: Annotated[float, Field(ge=0)] = 2.0
    extra_args: tuple[str, ...] = ()


class PoolsFile(StrictModel):
    triton: TritonSettings = TritonSettings()
    pools: tuple[PoolSpec, ...]

    @field_validator("pools")
    @classmethod
    def _unique_ports_and_names(cls, pools: tuple[PoolSpec, ...]) -> tuple[PoolSpec, ...]:
        names = [p.name for p in pools]
        if len(set(names)) != len(names):
            raise ValueError("pool names must be unique")
        ports: set[int] = set()
        for pool in pools:
            for i in range(pool.workers):
                for port in pool.worker_ports(i):
                    if port in ports:
                        raise ValueError(f"pool {pool.name}: port {port} used twice")
                    ports.add(port)
        return pools


class ModelsFile(StrictModel):
    models: tuple[ModelSpec, ...]

    def by_name(self) -> dict[str, ModelSpec]:
        return {m.name: m for m in self.models}


class StackConfig(StrictModel):
    """Pools and models together, checked against each other."""

    triton: TritonSettings
    pools: tuple[PoolSpec, ...]
    models: tuple[ModelSpec, ...]

    @model_validator(mode="after")
    def _pools_serve_known_models(self) -> StackConfig:
        known = {m.name for m in self.models}
        for pool in self.pools:
            unknown = set(pool.models) - known
            if unknown:
                raise ValueError(f"pool {pool.name} serves unknown models {sorted(unknown)}")
        return self

    def model(self, name: str) -> ModelSpec | None:
        return next((m for m in self.models if m.name == name), None)


def load_stack_config(pools_path: Path, models_path: Path) -> StackConfig:
    """Read and validate ``pools.yaml`` and ``models.yaml``; raise ConfigError naming the file."""
    raw_pools, raw_models = read_yaml(pools_path), read_yaml(models_path)
    try:
        pools = PoolsFile.model_validate(raw_pools)
    except ValueError as exc:
        raise ConfigError(f"{pools_path}: {exc}") from exc
    try:
        models = ModelsFile.model_validate(raw_models)
    except ValueError as exc:
        raise ConfigError(f"{models_path}: {exc}") from exc
    try:
        return StackConfig(triton=pools.triton, pools=pools.pools, models=models.models)
    except ValueError as exc:
        raise ConfigError(f"{pools_path} + {models_path}: {exc}") from exc
