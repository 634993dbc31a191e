"""Pods of a ``dns`` pool join and leave the gateway's worker pool as their Service's name resolves."""

from __future__ import annotations

from gateway.transport.triton.workers import WorkerPool
from scheduling.capacity import CapacityProfile
from settings.stack import PoolSpec, StackConfig
from settings.workers import HostsResolver, current_workers

PROFILE = CapacityProfile("a100", 80, 120_000, 32_768, 16_000.0, 2_000.0, 2.0)
POOL = PoolSpec(name="a100", gpu_type="a100", host="triton-a100", base_port=8010, discovery="dns", models=("chat",))


async def test_pods_join_keep_their_client_and_leave() -> None:
    dns: dict[str, tuple[str, ...]] = {"triton-a100": ("127.0.0.2", "127.0.0.3")}
    config = StackConfig.model_construct(pools=(POOL,), models=())
    pool = WorkerPool.connect([], discover=lambda: current_workers(config, HostsResolver(dns)))
    try:
        assert pool.discover is not None
        await pool.reconcile(pool.discover())
        assert [w.address.name for w in pool.workers] == ["a100-127.0.0.2", "a100-127.0.0.3"]
        assert (pool.workers[0].address.host, pool.workers[0].address.grpc_port) == ("127.0.0.2", 8011)
        staying = pool.worker("a100-127.0.0.3")

        dns["triton-a100"] = ("127.0.0.3", "127.0.0.4")  # KEDA replaced a pod
        await pool.reconcile(pool.discover())
        assert [w.address.name for w in pool.workers] == ["a100-127.0.0.3", "a100-127.0.0.4"]
        assert pool.worker("a100-127.0.0.3") is staying, "a pod that stays keeps its client and streams"
        assert {v.worker_id for v in pool.views({"a100": PROFILE})} == {"a100-127.0.0.3", "a100-127.0.0.4"}

        dns["triton-a100"] = ()  # scaled to zero
        await pool.reconcile(pool.discover())
        assert pool.workers == [] and pool.served_models() == set()
    finally:
        await pool.close()

