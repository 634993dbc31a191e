"""``PodReplicas``: a pool's pods counted from what its Service resolves to and each pod's
repository index (both injected here), raises, measured cold starts, timeouts."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from control.capacity.pods import PodReplicas
from control.capacity.snapshot import ReplicaCounts
from settings.control import ReplicaSettings
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings
from settings.workers import WorkerAddress


def _stack() -> StackConfig:
    return StackConfig(triton=TritonSettings(), pools=(
        PoolSpec(name="a10", gpu_type="a10", models=("embed", "vision"), host="triton-a10", discovery="dns"),
        PoolSpec(name="h100", gpu_type="h100", models=("chat",), host="triton-h100", discovery="dns",
                 base_port=9100)),
        models=(ModelSpec(name="embed", kind="embedding", version=1),
                ModelSpec(name="vision", kind="vision", version=1),
                ModelSpec(name="chat", kind="llm", version=1, context_tokens=4096)))


@dataclass
class Cluster:
    """Pods per pool, each with the models its Triton reports READY (None: it does not answer)."""

    pods: dict[str, dict[str, frozenset[str] | None]] = field(default_factory=dict)
    now: float = 100.0
    index_calls: int = 0

    def discover(self) -> list[WorkerAddress]:
        return [WorkerAddress(pool, i, pool, "r", ip, 8000, 8001, 8002, (), ip)
                for pool, pods in self.pods.items() for i, ip in enumerate(pods)]

    def ready(self, address: WorkerAddress, timeout_s: float) -> frozenset[str] | None:
        self.index_calls += 1
        return self.pods[address.pool][address.host]

    def clock(self) -> float:
        return self.now


@pytest.fixture
def cluster() -> Cluster:
    return Cluster({"a10": {"10.0.0.1": frozenset({"embed", "vision"})}, "h100": {}})


def _replicas(cluster: Cluster, timeout_s: float = 600.0) -> PodReplicas:
    settings = ReplicaSettings(default_boot_s=20.0, default_load_s=10.0)
    return PodReplicas(_stack(), cluster.discover, settings, timeout_s, cluster.ready, cluster.clock, survey_ttl_s=1.0)


def test_ready_counts_pods_that_answer_with_the_model(cluster: Cluster) -> None:
    cluster.pods["a10"]["10.0.0.2"] = frozenset({"embed"})  # vision still loading there
    cluster.pods["a10"]["10.0.0.3"] = None                  # listed, not answering
    pods = _replicas(cluster)
    assert pods.counts("a10", "embed") == ReplicaCounts(2, 0, 0)
    assert pods.counts("a10", "vision") == ReplicaCounts(1, 0, 0)
    assert pods.counts("h100", "chat") == ReplicaCounts(0, 0, 0)
    assert cluster.index_calls == 3, "one survey (one index call per pod) serves every count within its ttl"
    cluster.now += 1.5
    pods.counts("a10", "embed")
    assert cluster.index_calls == 6


def test_a_raise_counts_as_starting_until_the_pods_are_ready_and_measures_the_cold_start(cluster: Cluster) -> None:
    pods = _replicas(cluster)
    pods.counts("h100", "chat")
    assert pods.scale("h100", "chat", 2) == ()
    assert pods.counts("h100", "chat") == ReplicaCounts(0, 2, 0)
    cluster.now += 40.0
    cluster.pods["h100"]["10.0.1.1"] = frozenset({"chat"})
    assert pods.counts("h100", "chat") == ReplicaCounts(1, 1, 0)
    assert pods.cold_start_s()["chat"] == 30.0, "the configured default until a raise is measured"
    cluster.now += 20.0
    cluster.pods["h100"]["10.0.1.2"] = frozenset({"chat"})
    assert pods.counts("h100", "chat") == ReplicaCounts(2, 0, 0)
    assert pods.cold_starts[("h100", "chat")] == 60.0
    assert pods.cold_start_s()["chat"] == 60.0
    assert pods.document().replicas == () and pods.document().cold_start_s["chat"] == 60.0


def test_a_pool_wants_what_its_most_demanding_model_wants(cluster: Cluster) -> None:
    pods = _replicas(cluster)
    pods.counts("a10", "embed")
    pods.scale("a10", "embed", 3)
    pods.scale("a10", "vision", 1)  # every pod serves both: vision gets the pods embed asked for
    assert pods.counts("a10", "vision") == ReplicaCounts(1, 2, 0)


def test_asking_for_fewer_before_the_pods_come_ends_the_wait(cluster: Cluster) -> None:
    pods = _replicas(cluster)
    pods.counts("h100", "chat")
    pods.scale("h100", "chat", 3)
    pods.scale("h100", "chat", 2)
    assert pods.counts("h100", "chat").starting == 2
    pods.scale("h100", "chat", 0)
    assert pods.counts("h100", "chat") == ReplicaCounts(0, 0, 0)
    assert ("h100", "chat") not in pods.cold_starts


def test_pods_that_never_come_are_an_error_not_starting_forever(cluster: Cluster) -> None:
    pods = _replicas(cluster, timeout_s=300.0)
    pods.counts("h100", "chat")
    pods.scale("h100", "chat", 1)
    cluster.now += 301.0
    assert pods.counts("h100", "chat") == ReplicaCounts(0, 0, 0)
    assert len(pods.errors) == 1 and "pool h100: 1 pods wanted for 300 s, 0 ready" in pods.errors[0]


def test_an_unknown_pool_is_ignored(cluster: Cluster) -> None:
    pods = _replicas(cluster)
    assert pods.scale("nowhere", "chat", 2) == ()
    assert pods.counts("nowhere", "chat") == ReplicaCounts(0, 0, 0)
