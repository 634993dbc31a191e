"""The snapshot of one worker for one model: what placement plugins and the ``Predictor`` read."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.workers import ModelLimits, WorkerLoad, WorkerView


@dataclass(frozen=True)
class Endpoint:
    """A worker with what the scheduler has in flight on it and its observed speed for the model,
    as of ``now_s`` (the driver's clock when the snapshot was taken). ``output_share``: the share of
    an LLM request's reserved output its KV claim counts (``workers.kv_claim_tokens``)."""

    view: WorkerView
    load: WorkerLoad
    limits: ModelLimits
    tokens_per_s: float
    now_s: float = 0.0
    output_share: float = 1.0

    @property
    def worker_id(self) -> str:
        return self.view.worker_id
