"""What the capacity controller needs of the replicas it sizes, wherever they run.

Two implementations: ``replicas.ReplicaSet`` (local mode: Triton processes control starts,
loads, warms and drains itself) and ``pods.PodReplicas`` (Kubernetes mode: a pool's pods, which
KEDA starts and stops on the controller's ``shunter_capacity_desired_replicas``; control only
counts them). The controller, its admin routes and ``/metrics`` use this protocol alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from control.capacity.snapshot import ReplicaCounts
from settings.capacity_wire import ReplicasDocument


class ReplicaSource(Protocol):
    cold_starts: dict[tuple[str, str], float]  # (pool, model) -> last measured start-to-ready, s
    errors: list[str]                          # what went wrong starting or stopping replicas

    def counts(self, pool: str, model: str) -> ReplicaCounts:
        """Replicas of ``model`` on ``pool`` now: ready, starting, draining."""

    def scale(self, pool: str, model: str, desired: int) -> Sequence[object]:
        """Act on (or record) the controller's ``desired`` count; return what was started."""

    def document(self) -> ReplicasDocument:
        """The replicas document the gateways poll."""

    def cold_start_s(self) -> dict[str, float]:
        """Predicted seconds from "scale up" to "ready", per model."""
