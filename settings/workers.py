"""Where each Triton worker listens and what it serves: what the gateway routes by and what
control's supervisor starts. Worker ``i`` of a ``static`` pool listens on ``base_port + 3*i``
(HTTP), ``+1`` (gRPC), ``+2`` (metrics) of the pool's host.

A ``dns`` pool (``discovery: dns``, a Kubernetes Deployment behind a headless Service) has one
worker per address its ``host`` resolves to now, each on ``base_port``, ``+1``, ``+2``, named
``<pool>-<address>`` so that a pod keeps its name while others come and go. ``current_workers``
resolves them through a ``Resolver``: ``DnsResolver`` asks the system resolver (cluster DNS in a
pod, which lists ready pods only); ``HostsResolver`` reads a hosts-style mapping (``ADDRESS
NAME...`` lines) where a name lists every address given for it, which tests use. Gateway and
control both call it, each on its own schedule.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

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
    instance: str | None = None  # a discovered pod's address: its stable name within the pool

    @property
    def name(self) -> str:
        return f"{self.pool}-{self.instance if self.instance is not None else self.index}"


def worker_addresses(config: StackConfig, slots: Mapping[str, int] | None = None) -> list[WorkerAddress]:
    """Every worker of every static pool, in pool order (``dns`` pools: ``current_workers``):
    ``pool.workers`` of each, or with ``slots`` (pool -> worker slots,
    ``settings.capacity.CapacitySettings.slots``) every slot a pool may have."""
    counts = slots or {}
    return [_address(pool, i) for pool in config.pools if pool.discovery == "static"
            for i in range(counts.get(pool.name, pool.workers))]


def _address(pool: PoolSpec, index: int) -> WorkerAddress:
    http, grpc, metrics = pool.worker_ports(index)
    return WorkerAddress(pool.name, index, pool.gpu_type, pool.region, pool.host, http, grpc,
                         metrics, pool.models)


class Resolver(Protocol):
    def resolve(self, host: str) -> list[str]:
        """Every address ``host`` names now, sorted; empty when it names none."""


def _address_key(address: str) -> tuple[int, int]:
    parsed = ipaddress.ip_address(address)
    return parsed.version, int(parsed)


@dataclass(frozen=True)
class DnsResolver:
    """The system resolver (``getaddrinfo``); a headless Service name gives one A record per ready pod."""

    def resolve(self, host: str) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except socket.gaierror:
            return []
        return sorted({str(info[4][0]) for info in infos}, key=_address_key)


@dataclass(frozen=True)
class HostsResolver:
    """A name -> addresses mapping, read from hosts-file text; unknown names fall through to
    ``fallback`` (none: they resolve to nothing)."""

    entries: Mapping[str, tuple[str, ...]]
    fallback: Resolver | None = field(default=None)

    @classmethod
    def from_text(cls, text: str, fallback: Resolver | None = None) -> HostsResolver:
        """``ADDRESS NAME [NAME...]`` per line, ``#`` comments; a bad address raises ValueError."""
        entries: dict[str, set[str]] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            words = raw.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) < 2:
                raise ValueError(f"hosts line {number}: an address and at least one name are needed")
            address = str(ipaddress.ip_address(words[0]))
            for name in words[1:]:
                entries.setdefault(name, set()).add(address)
        return cls({name: tuple(sorted(found, key=_address_key)) for name, found in entries.items()}, fallback)

    @classmethod
    def from_file(cls, path: Path, fallback: Resolver | None = None) -> HostsResolver:
        return cls.from_text(path.read_text(encoding="utf-8"), fallback)

    def resolve(self, host: str) -> list[str]:
        if host in self.entries:
            return list(self.entries[host])
        return self.fallback.resolve(host) if self.fallback is not None else []


def pod_workers(pool: PoolSpec, resolver: Resolver) -> list[WorkerAddress]:
    """One worker per address ``pool.host`` resolves to now, all on the pool's first ports."""
    http, grpc, metrics = pool.worker_ports(0)
    return [WorkerAddress(pool.name, index, pool.gpu_type, pool.region, ip, http, grpc, metrics, pool.models, ip)
            for index, ip in enumerate(resolver.resolve(pool.host))]


def current_workers(config: StackConfig, resolver: Resolver) -> list[WorkerAddress]:
    """Every worker now: static pools' fixed workers and ``dns`` pools' resolved pods, in pool order."""
    return [worker for pool in config.pools
            for worker in (pod_workers(pool, resolver) if pool.discovery == "dns"
                           else [_address(pool, i) for i in range(pool.workers)])]
