"""Triton workers that control does not start: the pods of each pool, found by name.

In Kubernetes mode every pool is a Deployment whose pods all listen on the same ports (the
pool's ``base_port`` for HTTP, ``+1`` gRPC, ``+2`` metrics) behind a headless ``Service``; the
pool's ``host`` in ``pools.yaml`` is that Service's DNS name, which resolves to one address per
ready pod. ``pool_workers(config, resolver)`` turns that into one ``WorkerAddress`` per pod, in
address order, at the moment it is called: control resolves again before every load, so pods
that KEDA added or removed since are seen.

Why DNS and not the Kubernetes API: the headless Service is what Kubernetes itself keeps in step
with the pods' readiness, it needs no ServiceAccount, Role or client library in control, and it
works the same for the local stand-in (several Tritons on 127.0.0.x behind one name). The cost:
a pod that is starting (not ready) is not listed, which is what we want, since it reads the
rendered repository when it starts.

``Resolver`` is the seam: ``DnsResolver`` asks the system resolver (cluster DNS in a pod);
``HostsResolver`` reads a hosts-style mapping (``ADDRESS NAME...`` lines) where a name lists
every address given for it, which tests use.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from settings.stack import PoolSpec, StackConfig
from settings.workers import WorkerAddress


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
    """A fixed name -> addresses mapping, read from hosts-file text; unknown names fall through to
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


def _pod_address(pool: PoolSpec, index: int, ip: str) -> WorkerAddress:
    http, grpc, metrics = pool.worker_ports(0)  # every pod of a pool listens on the same ports
    return WorkerAddress(pool.name, index, pool.gpu_type, pool.region, ip, http, grpc, metrics, pool.models)


def pool_workers(config: StackConfig, resolver: Resolver) -> list[WorkerAddress]:
    """One worker per address that each pool's ``host`` resolves to now, pools in config order."""
    return [_pod_address(pool, index, ip)
            for pool in config.pools
            for index, ip in enumerate(resolver.resolve(pool.host))]


def service_urls(host: str, port: int, resolver: Resolver) -> list[str]:
    """``http://ADDRESS:port`` for every address ``host`` resolves to now (the gateways' pods)."""
    return [f"http://[{ip}]:{port}" if ":" in ip else f"http://{ip}:{port}" for ip in resolver.resolve(host)]
