"""Triton workers that control does not start: the pods of each pool, found by name.

In Kubernetes mode every pool is a Deployment whose pods all listen on the same ports behind a
headless ``Service``; the pool's ``host`` in ``pools.yaml`` is that Service's DNS name, which
resolves to one address per ready pod. ``pool_workers(config, resolver)`` turns that into one
``WorkerAddress`` per pod (``settings.workers.pod_workers``, which the gateway uses too) at the
moment it is called: control resolves again before every load, so pods that KEDA added or
removed since are seen.

Why DNS and not the Kubernetes API: the headless Service is what Kubernetes itself keeps in step
with the pods' readiness, it needs no ServiceAccount, Role or client library in control, and it
works the same for the local stand-in (several Tritons on 127.0.0.x behind one name). The cost:
a pod that is starting (not ready) is not listed, which is what we want, since it reads the
rendered repository when it starts.
"""

from __future__ import annotations

from settings.stack import StackConfig
from settings.workers import DnsResolver, HostsResolver, Resolver, WorkerAddress, pod_workers

__all__ = ["DnsResolver", "HostsResolver", "Resolver", "pool_workers", "service_urls"]


def pool_workers(config: StackConfig, resolver: Resolver) -> list[WorkerAddress]:
    """One worker per address that each pool's ``host`` resolves to now, pools in config order
    (in Kubernetes mode every pool is a set of pods, whatever its ``discovery``)."""
    return [worker for pool in config.pools for worker in pod_workers(pool, resolver)]


def service_urls(host: str, port: int, resolver: Resolver) -> list[str]:
    """``http://ADDRESS:port`` for every address ``host`` resolves to now (the gateways' pods)."""
    return [f"http://[{ip}]:{port}" if ":" in ip else f"http://{ip}:{port}" for ip in resolver.resolve(host)]
