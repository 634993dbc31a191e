"""What control tells Prometheus besides the capacity controller's series.

``RolloutCollector`` exports, at every scrape, ``shunter_rollout_active{model}`` (1 while a
canary or A/B rollout of the model runs or is paused, else 0: every configured model has the
series) and, for an active rollout, ``shunter_rollout_started_timestamp_seconds`` and
``shunter_rollout_last_change_timestamp_seconds{model,kind,status}`` (its weights or status last
changed): the "rollout stuck" alert compares that with ``time()``.

``prometheus_targets(addresses)`` is the body of ``/admin/v1/prometheus/targets``: Prometheus'
HTTP service discovery format, one group per Triton worker (its metrics port, labelled with
worker, pool, gpu_type and region), so a Prometheus follows replicas as the capacity
controller starts and stops them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from control.registry.records import RolloutRecord
from settings.workers import WorkerAddress


class RolloutCollector(Collector):
    def __init__(self, models: Sequence[str], active_rollout: Callable[[str], RolloutRecord | None]) -> None:
        self.models = tuple(models)
        self.active_rollout = active_rollout

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = GaugeMetricFamily("shunter_rollout_active", "1 while a rollout of the model runs or is paused",
                                   labels=["model"])
        started = GaugeMetricFamily("shunter_rollout_started_timestamp_seconds", "When the active rollout started",
                                    labels=["model", "kind", "status"])
        changed = GaugeMetricFamily("shunter_rollout_last_change_timestamp_seconds",
                                    "When the active rollout's weights or status last changed",
                                    labels=["model", "kind", "status"])
        for model in self.models:
            rollout = self.active_rollout(model)
            active.add_metric([model], 0.0 if rollout is None else 1.0)
            if rollout is not None:
                labels = [model, rollout.kind, rollout.status.value]
                started.add_metric(labels, rollout.started_at)
                changed.add_metric(labels, rollout.updated_at)
        yield from (active, started, changed)


def prometheus_targets(addresses: Sequence[WorkerAddress]) -> list[dict[str, object]]:
    """Prometheus HTTP service discovery groups: one per worker, at its metrics port."""
    return [{"targets": [f"{a.host}:{a.metrics_port}"],
             "labels": {"worker": a.name, "pool": a.pool, "gpu_type": a.gpu_type, "region": a.region}}
            for a in addresses]
