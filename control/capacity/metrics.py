"""The capacity controller's Prometheus series, on control's ``/metrics`` (a registry of its own).

``shunter_capacity_desired_replicas{pool,model}`` is exactly the count the controller wants for
one (pool, model) after its bounds, caps, stabilisation window and overrides: KEDA's Prometheus
scaler reads it to size each pool's Deployment (``docs/autoscaling.md``, "Metrics and KEDA").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge

from scheduling.autoscaling import PoolModel, ScaleDecision

if TYPE_CHECKING:
    from control.capacity.snapshot import ReplicaCounts

_KEY = ["pool", "model"]


@dataclass
class CapacityMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.desired = Gauge("shunter_capacity_desired_replicas",
                             "Replicas the capacity controller wants per pool and model (KEDA's target)", _KEY,
                             registry=r)
        self.ready = Gauge("shunter_capacity_ready_replicas", "Replicas loaded, warmed and taking work", _KEY,
                           registry=r)
        self.starting = Gauge("shunter_capacity_starting_replicas", "Replicas booting, loading or warming", _KEY,
                              registry=r)
        self.draining = Gauge("shunter_capacity_draining_replicas", "Replicas finishing their work before they stop",
                              _KEY, registry=r)
        self.decisions = Counter("shunter_capacity_decisions", "Capacity decisions by action and reason",
                                 [*_KEY, "action", "reason"], registry=r)
        self.capped = Gauge("shunter_capacity_capped_by_budget",
                            "1 while a cap (max_replicas, a model's or tenant's budget) holds the count back", _KEY,
                            registry=r)
        self.cold_start_s = Gauge("shunter_capacity_cold_start_seconds",
                                  "Last measured time from starting a replica of the model to ready", _KEY, registry=r)

    def record(self, decision: ScaleDecision, counts: ReplicaCounts) -> None:
        labels = (decision.key.pool, decision.key.model)
        self.desired.labels(*labels).set(decision.desired)
        self.set_counts(decision.key, counts)
        self.capped.labels(*labels).set(1 if decision.capped_by_budget else 0)
        self.decisions.labels(*labels, decision.action.value, decision.reason.value).inc()

    def set_counts(self, key: PoolModel, counts: ReplicaCounts) -> None:
        labels = (key.pool, key.model)
        self.ready.labels(*labels).set(counts.ready)
        self.starting.labels(*labels).set(counts.starting)
        self.draining.labels(*labels).set(counts.draining)

    def record_cold_starts(self, cold_starts: dict[tuple[str, str], float]) -> None:
        for (pool, model), seconds in cold_starts.items():
            self.cold_start_s.labels(pool, model).set(seconds)
