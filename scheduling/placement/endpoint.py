"""The snapshot of one worker that placement plugins read, for one model."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.workers import ModelLimits, WorkerLoad, WorkerView


@dataclass(frozen=True)
class Endpoint:
    """A worker with what the scheduler has in flight on it and its observed speed for the model."""

    view: WorkerView
    load: WorkerLoad
    limits: ModelLimits
    tokens_per_s: float

    @property
    def worker_id(self) -> str:
        return self.view.worker_id
