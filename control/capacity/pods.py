"""The replicas of every pool in Kubernetes mode: the pods behind each pool's headless Service.

Control starts no pod there. KEDA scales each pool's Deployment to the most any of its models
needs, ``max(shunter_capacity_desired_replicas{pool=...})`` (the ScaledObject ``shunter k8s
render`` writes); every pod loads all of its pool's models from the S3 repository when it starts
(``--load-model=*``; Triton's ``model_warmup`` runs inside the load) and reports ready only then.
So ``PodReplicas`` observes and remembers; its ``scale`` records the count the controller wants,
which the controller publishes as that metric:

* ready: the pods the pool's name resolves to now (a headless Service lists ready pods only)
  whose repository index has the model READY: one index call per pod per survey, and a survey is
  reused for ``survey_ttl_s``;
* starting: pods asked for and not ready yet: the pool's wanted count (the most any of its models
  was last given) minus the ready pods, for ``pod_start_timeout_s`` after the count was raised.
  Past that the shortfall is recorded in ``errors`` (quota, image pull, no node with the GPU) and
  no longer counted as starting, so the policy sees the pool as it is;
* draining: 0. A pod that terminates leaves the Service at once; Kubernetes gives it the
  Deployment's grace period and Triton's ``--exit-timeout-secs`` bounds the work it finishes;
* cold starts: from the raise to the first survey that finds the raised count ready, per (pool,
  model); the prediction per model (``cold_start_s``) is their moving average, and
  ``default_boot_s + default_load_s`` of ``control.yaml``'s ``replicas`` before the first.

``document()`` lists no replica: gateways on a cluster place on the pods they resolve themselves
(``gateway/replicas.py`` lets a worker the document does not list through) and take only the
cold-start predictions from it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from control.capacity.snapshot import ReplicaCounts
from control.triton_control import ready_models
from settings.capacity_wire import ReplicasDocument
from settings.control import ReplicaSettings
from settings.stack import StackConfig
from settings.workers import WorkerAddress

log = logging.getLogger(__name__)
_EWMA = 0.5  # weight of the newest measured cold start
MAX_ERRORS = 50
ReadyModels = Callable[[WorkerAddress, float], "frozenset[str] | None"]


@dataclass
class _Raise:
    """A pool's wanted count went above its ready pods at ``at_s``."""

    at_s: float
    wanted: int
    measured: set[str] = field(default_factory=set)  # models whose cold start this raise measured


class PodReplicas:
    """See the module docstring. Thread-safe."""

    def __init__(self, config: StackConfig, discover: Callable[[], Sequence[WorkerAddress]], settings: ReplicaSettings,
                 pod_start_timeout_s: float, ready: ReadyModels = ready_models,
                 clock: Callable[[], float] = time.monotonic, survey_ttl_s: float = 1.0) -> None:
        self._models = {p.name: frozenset(p.models) for p in config.pools}
        self._served = sorted({m for models in self._models.values() for m in models})
        self._discover, self._ready, self._clock = discover, ready, clock
        self._settings, self._start_timeout_s, self._ttl_s = settings, pod_start_timeout_s, survey_ttl_s
        self._lock = threading.RLock()
        self._survey: dict[str, list[frozenset[str]]] = {pool: [] for pool in self._models}
        self._survey_at: float | None = None
        self._wanted: dict[str, dict[str, int]] = {pool: {} for pool in self._models}
        self._raised: dict[str, _Raise] = {}
        self._cold_start_ewma: dict[str, float] = {}
        self.cold_starts: dict[tuple[str, str], float] = {}
        self.errors: list[str] = []

    # ---- observing -------------------------------------------------------------------------------

    def survey(self) -> dict[str, list[frozenset[str]]]:
        """Per pool, the READY models of each pod that answers now (reused for ``survey_ttl_s``)."""
        now = self._clock()
        with self._lock:
            if self._survey_at is not None and now - self._survey_at < self._ttl_s:
                return self._survey
        found: dict[str, list[frozenset[str]]] = {pool: [] for pool in self._models}
        for address in self._discover():
            models = self._ready(address, self._settings.gateway_timeout_s)
            if models is not None and address.pool in found:  # a pod that does not answer serves nothing
                found[address.pool].append(models)
        with self._lock:
            self._survey, self._survey_at = found, now
            for pool in list(self._raised):
                self._settle(pool, now)
            return found

    def counts(self, pool: str, model: str) -> ReplicaCounts:
        """Ready pods with ``model``, and pods asked for and not ready yet (see the module docstring)."""
        pods = self.survey().get(pool, [])
        ready = sum(1 for models in pods if model in models)
        with self._lock:
            pending = self._raised.get(pool)
            starting = max(0, pending.wanted - ready) if pending is not None else 0
        return ReplicaCounts(ready, starting, 0)

    def _settle(self, pool: str, now: float) -> None:
        """Measure the cold starts a raise has reached; end it when all are, or when it timed out."""
        pending = self._raised[pool]
        pods = self._survey[pool]
        for model in self._models[pool] - pending.measured:
            if sum(1 for models in pods if model in models) >= pending.wanted:
                seconds = now - pending.at_s
                pending.measured.add(model)
                self.cold_starts[(pool, model)] = seconds
                previous = self._cold_start_ewma.get(model)
                self._cold_start_ewma[model] = seconds if previous is None else _EWMA * seconds + (1 - _EWMA) * previous
                log.info("pool %s: %d pods ready with %s %.1f s after the raise", pool, pending.wanted, model, seconds)
        if pending.measured == self._models[pool]:
            del self._raised[pool]
        elif now - pending.at_s > self._start_timeout_s:
            del self._raised[pool]
            self._error(f"pool {pool}: {pending.wanted} pods wanted for {self._start_timeout_s:.0f} s, {len(pods)} "
                        "ready (see the Deployment's events: GPU quota, image pull, no node with the GPU product)")

    def _error(self, message: str) -> None:
        log.error("%s", message)
        self.errors.append(message)
        del self.errors[:-MAX_ERRORS]

    # ---- acting ----------------------------------------------------------------------------------

    def scale(self, pool: str, model: str, desired: int) -> Sequence[object]:
        """Record that ``model`` wants ``desired`` pods of ``pool``; KEDA acts on the published count.
        A pool's wanted count rising above its ready pods starts a raise (a cold start to measure)."""
        with self._lock:
            if pool not in self._wanted:
                return ()
            self._wanted[pool][model] = desired
            wanted = max(self._wanted[pool].values())
            ready_pods = len(self._survey[pool])
            pending = self._raised.get(pool)
            if wanted <= ready_pods:
                self._raised.pop(pool, None)  # no pod to wait for (any asked for are not wanted now)
            elif pending is None or wanted > pending.wanted:
                self._raised[pool] = _Raise(self._clock(), wanted)
            else:
                pending.wanted = wanted  # fewer than asked, still more than ready: wait for those
        return ()

    def document(self) -> ReplicasDocument:
        """No replica listed (see the module docstring); the cold-start predictions."""
        return ReplicasDocument(replicas=(), cold_start_s=self.cold_start_s())

    def cold_start_s(self) -> dict[str, float]:
        """Per model served by a pool: the measured cold starts' average, else the configured default."""
        default_s = self._settings.default_boot_s + self._settings.default_load_s
        with self._lock:
            return {model: round(self._cold_start_ewma.get(model, default_s), 3) for model in self._served}
