"""Where each Triton worker listens and what it serves: what the gateway routes by and what
control's supervisor starts. Worker ``i`` of a pool listens on ``base_port + 3*i`` (HTTP), ``+1``
(gRPC), ``+2`` (metrics) of the pool's host."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from settings.stack import PoolSpec, StackConfig


@dataclass(frozen=True)
class WorkerAddress:
    """Where one worker listens and what it serves; the gateway routes by these."""

    pool: str
    index: int
    gpu_type: str
    region: str
    host: str
    http_port: int
    grpc_port: int
    metrics_port: int
    models: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.pool}-{self.index}"


def worker_addresses(config: StackConfig, slots: Mapping[str, int] | None = None) -> list[WorkerAddress]:
    """Every worker of every pool, in pool order: ``pool.workers`` of each, or with ``slots`` (pool ->
    worker slots, ``settings.capacity.CapacitySettings.slots``) every slot a pool may have."""
    counts = slots or {}
    return [_address(pool, i) for pool in config.pools for i in range(counts.get(pool.name, pool.workers))]


def _address(pool: PoolSpec, index: int) -> WorkerAddress:
    http, grpc, metrics = pool.worker_ports(index)
    return WorkerAddress(pool.name, index, pool.gpu_type, pool.region, pool.host, http, grpc,
                         metrics, pool.models)
