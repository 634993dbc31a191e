"""The replicas document: what control's capacity controller tells the gateways about replicas.

Control serves it at ``GET /admin/capacity/replicas`` (admin bearer token); every gateway polls it
about once a second and places work only on a replica whose state is ``ready``. A replica is one
Triton worker process of a pool (worker ``index`` listens on ``pool.worker_ports(index)``).

States, in the order a replica goes through them::

    starting  the process runs, its models are loading and warming: no traffic yet
    ready     every model it serves is loaded and warmed: placement may send it work
    draining  being removed: no new work; in-flight work finishes, then it is stopped
    stopped   no process (a reserved slot, or a replica that was removed)

``cold_start_s`` is control's prediction, per model, of the seconds from "start a replica" to
"ready" (measured on the last starts, else a configured default); the gateway uses it to answer
503 ``model_cold`` with ``Retry-After`` at once when a held request's deadline is shorter.

Unlike configuration files, the document ignores fields it does not know, so a newer control can
add some without breaking older gateways.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

REPLICAS_PATH = "/admin/capacity/replicas"


class ReplicaState(StrEnum):
    """Where one replica is in its life; only ``ready`` takes new work."""

    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    STOPPED = "stopped"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ReplicaWire(_Wire):
    """One replica slot of a pool: its state and the models loaded and warmed on it.

    A model is added to ``models`` only once it is loaded and warmed, and removed before it is
    unloaded (scale-to-zero, or fewer replicas of one model while the process serves others), so
    a gateway places a request for model ``m`` on this replica only while ``state`` is ``ready``
    and ``m`` is in ``models``."""

    pool: str
    index: Annotated[int, Field(ge=0)]
    name: str  # "<pool>-<index>", as settings.workers.WorkerAddress.name
    state: ReplicaState
    models: tuple[str, ...] = ()  # the models loaded AND warmed on it: it takes work for these only
    since_s: Annotated[float, Field(ge=0)] = 0.0  # seconds the replica has been in ``state``

    @property
    def takes_work(self) -> bool:
        return self.state is ReplicaState.READY


class ReplicasDocument(_Wire):
    """``GET /admin/capacity/replicas``: every replica slot control manages, and cold-start predictions."""

    replicas: tuple[ReplicaWire, ...] = ()
    cold_start_s: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)

    def ready(self, pool: str, index: int) -> bool:
        """Whether replica ``index`` of ``pool`` may take new work (False when it is not listed)."""
        return any(r.pool == pool and r.index == index and r.takes_work for r in self.replicas)

    def serves(self, pool: str, index: int, model: str) -> bool:
        """Whether replica ``index`` of ``pool`` may take new work for ``model`` now."""
        return any(r.pool == pool and r.index == index and r.takes_work and model in r.models
                   for r in self.replicas)

    def ready_models(self) -> dict[str, set[str]]:
        """The names of the ready replicas serving each model."""
        out: dict[str, set[str]] = {}
        for replica in self.replicas:
            if replica.takes_work:
                for model in replica.models:
                    out.setdefault(model, set()).add(replica.name)
        return out
