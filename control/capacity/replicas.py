"""The replicas of every pool on this host: Triton worker processes started, loaded, warmed,
drained and stopped at the capacity controller's request.

A pool has ``slots`` replica slots (slot ``i`` listens on ``pool.worker_ports(i)``). The first
``pool.workers`` slots are the workers the supervisor starts with the stack, all of the pool's
models loaded; the others are stopped until the controller needs them. ``scale(pool, model,
desired)`` plans the actions with ``slots.plan`` and runs each in a background thread:

* start: a new ``tritonserver`` with no model (explicit model control), added to the supervisor,
  then the model is loaded through the repository API — Triton runs the rendered
  ``model_warmup`` during the load, before it reports the model READY — and one more warm
  request is sent to every served version; only then is the model listed as ready (the
  replicas document, ``GET /admin/capacity/replicas``, is what gateways place by);
* load: the same on a running replica that lacks the model;
* unload: the model leaves the replica's ready list at once (gateways stop placing on it within
  a poll), ``drain_grace_s`` later it is unloaded, Triton lets the requests in flight finish, and
  the replica keeps serving its other models;
* drain: for a replica's last model the whole process goes: it leaves the document's ready list,
  ``drain_grace_s`` later it gets SIGTERM, and Triton finishes the requests in flight before it
  exits. A replica the controller started waits up to ``drain_timeout_s`` for them
  (``--exit-timeout-secs``); a worker started with the stack keeps ``triton.exit_timeout_s``.
  (Not an unload first: Triton 2.51 keeps a decoupled model UNLOADING while a client's gRPC
  stream that served it stays open — the gateway keeps idle generation streams for reuse — so an
  LLM's unload would wait until the stream closes; its shutdown counts in-flight requests.)

Every wait is bounded (``control.yaml``'s ``replicas``); a start or load that fails leaves the
slot stopped (or without the model) and is recorded in ``errors``. The times from start to ready
are measured: they predict a model's cold start (``cold_start_s``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

import httpx

from control.capacity.slots import ActionKind, SlotAction, SlotView, plan
from control.capacity.snapshot import ReplicaCounts
from control.errors import ControlError
from control.supervisor import Supervisor, WorkerProcess, WorkerStartError
from control.triton_control import TritonControlError, load, loaded, unload, wait_versions, warm_request
from control.triton_runtime import TritonRuntime
from settings.capacity_wire import ReplicasDocument, ReplicaState, ReplicaWire
from settings.control import ReplicaSettings
from settings.stack import PoolSpec, StackConfig
from settings.workers import WorkerAddress

log = logging.getLogger(__name__)
_EWMA = 0.5  # weight of the newest measured boot / load time


@dataclass
class Slot:
    """One replica slot of a pool and what runs in it."""

    pool: PoolSpec
    index: int
    address: WorkerAddress
    state: ReplicaState = ReplicaState.STOPPED
    ready: set[str] = field(default_factory=set)
    loading: set[str] = field(default_factory=set)
    unloading: set[str] = field(default_factory=set)
    since_s: float = 0.0
    worker: WorkerProcess | None = None

    def view(self) -> SlotView:
        return SlotView(self.index, self.state, frozenset(self.ready), frozenset(self.loading),
                        frozenset(self.unloading))


class ReplicaSet:
    """Every replica slot; see the module docstring. Thread-safe."""

    def __init__(self, config: StackConfig, slots: Mapping[str, int], supervisor: Supervisor,
                 runtime: TritonRuntime, repository: Path, log_dir: Path, settings: ReplicaSettings,
                 versions: Callable[[str], Iterable[int]], clock: Callable[[], float] = time.monotonic) -> None:
        self._config, self._supervisor, self._settings = config, supervisor, settings
        self._runtime, self._repository, self._log_dir = runtime, repository, log_dir
        self._versions, self._clock = versions, clock
        self._lock = threading.RLock()
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="replica")
        self._closed = False
        self.boot_s: dict[str, float] = {}       # pool -> measured process boot
        self.load_s: dict[str, float] = {}       # model -> measured load + warm
        self.cold_starts: dict[tuple[str, str], float] = {}  # (pool, model) -> last start-to-ready
        self.errors: list[str] = []
        self.slots: dict[str, list[Slot]] = {}
        running = {(w.address.pool, w.address.index): w for w in supervisor.workers}
        now = clock()
        for pool in config.pools:
            count = max(slots.get(pool.name, pool.workers), pool.workers)
            self.slots[pool.name] = [self._slot(pool, i, running.get((pool.name, i)), now) for i in range(count)]

    def _slot(self, pool: PoolSpec, index: int, worker: WorkerProcess | None, now: float) -> Slot:
        http, grpc, metrics = pool.worker_ports(index)
        address = WorkerAddress(pool.name, index, pool.gpu_type, pool.region, pool.host, http, grpc, metrics,
                                pool.models)
        if worker is None:
            return Slot(pool, index, address, since_s=now)
        return Slot(pool, index, address, ReplicaState.READY, set(worker.load_at_start), since_s=now, worker=worker)

    # ---- reading ---------------------------------------------------------------------------------

    def counts(self, pool: str, model: str) -> ReplicaCounts:
        """Replicas of ``model`` on ``pool``: ready, starting (loading), draining."""
        with self._lock:
            slots = self.slots.get(pool, [])
            return ReplicaCounts(
                sum(1 for s in slots if s.state is ReplicaState.READY and model in s.ready),
                sum(1 for s in slots if model in s.loading),
                sum(1 for s in slots if model in s.unloading))

    def document(self) -> ReplicasDocument:
        """The replicas document the gateways poll."""
        now = self._clock()
        with self._lock:
            rows = [ReplicaWire(pool=s.pool.name, index=s.index, name=s.address.name, state=s.state,
                                models=tuple(sorted(s.ready)) if s.state is ReplicaState.READY else (),
                                since_s=max(0.0, now - s.since_s))
                    for slots in self.slots.values() for s in slots]
        return ReplicasDocument(replicas=tuple(rows), cold_start_s=self.cold_start_s())

    def cold_start_s(self) -> dict[str, float]:
        """Predicted seconds from "scale up" to "ready" per model: its load + warm time, plus a
        process boot when no replica of a pool serving it is running."""
        out: dict[str, float] = {}
        with self._lock:
            for model in self._config.models:
                pools = [p for p in self._config.pools if model.name in p.models]
                if not pools:
                    continue
                load_s = self.load_s.get(model.name, self._settings.default_load_s)
                boots = [0.0 if any(s.state is ReplicaState.READY for s in self.slots[p.name])
                         else self.boot_s.get(p.name, self._settings.default_boot_s) for p in pools]
                out[model.name] = round(load_s + min(boots), 3)
        return out

    def addresses(self) -> list[WorkerAddress]:
        """The running replicas, each with the models it has or is loading (rollouts load there)."""
        with self._lock:
            return [dataclasses.replace(s.address, models=tuple(sorted(s.ready | s.loading)))
                    for slots in self.slots.values() for s in slots
                    if s.state in (ReplicaState.READY, ReplicaState.STARTING)]

    # ---- acting ----------------------------------------------------------------------------------

    def scale(self, pool: str, model: str, desired: int) -> list[SlotAction]:
        """Start the actions that bring ``model`` on ``pool`` to ``desired`` replicas; return them."""
        with self._lock:
            if self._closed or pool not in self.slots:
                return []
            actions = plan([s.view() for s in self.slots[pool]], model, desired)
            for action in actions:
                slot = self.slots[pool][action.index]
                self._begin(slot, action)
                self._executor.submit(self._run, slot, action)
            return actions

    def _begin(self, slot: Slot, action: SlotAction) -> None:
        """The state change that the gateways see at once."""
        now = self._clock()
        if action.kind is ActionKind.START:
            slot.state, slot.since_s, slot.loading = ReplicaState.STARTING, now, {action.model}
        elif action.kind is ActionKind.LOAD:
            slot.loading.add(action.model)
        elif action.kind is ActionKind.UNLOAD:
            slot.ready.discard(action.model)
            slot.unloading.add(action.model)
        else:
            slot.state, slot.since_s = ReplicaState.DRAINING, now
            slot.unloading |= slot.ready | slot.loading
            slot.ready.clear()

    def _run(self, slot: Slot, action: SlotAction) -> None:
        try:
            if action.kind is ActionKind.START:
                self._start(slot, action.model)
            elif action.kind is ActionKind.LOAD:
                self._load(slot, action.model, boot_s=None, started=self._clock())
            elif action.kind is ActionKind.UNLOAD:
                self._unload(slot, action.model)
            else:
                self._drain(slot)
        except (ControlError, httpx.HTTPError, OSError) as exc:
            self._failed(slot, action, exc)
        except Exception as exc:  # a background thread must never die silently
            log.exception("replica %s: %s failed", slot.address.name, action.kind)
            self._failed(slot, action, exc)

    def _start(self, slot: Slot, model: str) -> None:
        started = self._clock()
        worker = WorkerProcess(slot.address, self._runtime, self._config.triton, self._repository, self._log_dir)
        worker.load_at_start = ()
        worker.exit_timeout_s = max(worker.exit_timeout_s, math.ceil(self._settings.drain_timeout_s))
        with self._lock:  # close() stops every slot's worker under this lock: none is left behind
            if self._closed:
                return
            slot.worker = worker
            worker.start()
        self._supervisor.add(worker)
        self._wait_live(worker, self._settings.load_timeout_s)
        boot_s = self._clock() - started
        with self._lock:
            self.boot_s[slot.pool.name] = _ewma(self.boot_s.get(slot.pool.name), boot_s)
        self._load(slot, model, boot_s=boot_s, started=started)

    def _wait_live(self, worker: WorkerProcess, timeout_s: float) -> None:
        deadline = self._clock() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while self._clock() < deadline:
                if not worker.alive():
                    raise WorkerStartError(f"worker {worker.address.name} exited; see {worker.log_path}")
                if worker.live(client):
                    return
                time.sleep(0.1)
        raise WorkerStartError(f"worker {worker.address.name} not live after {timeout_s:.0f} s; see {worker.log_path}")

    def _load(self, slot: Slot, model: str, boot_s: float | None, started: float) -> None:
        spec = self._config.model(model)
        if spec is None:
            raise TritonControlError(f"model {model} is not configured")
        versions = set(self._versions(model)) or {spec.version}
        loading_at = self._clock()
        load(slot.address, model, self._settings.load_timeout_s)
        wait_versions([slot.address], model, versions, self._settings.load_timeout_s)
        for version in sorted(versions):
            warm_request(slot.address, spec, version, timeout_s=self._settings.load_timeout_s)
        now = self._clock()
        with self._lock:
            self.load_s[model] = _ewma(self.load_s.get(model), now - loading_at)
            self.cold_starts[(slot.pool.name, model)] = now - started
            slot.loading.discard(model)
            slot.ready.add(model)
            if slot.worker is not None:
                slot.worker.load_at_start = tuple(sorted(slot.ready))
            if slot.state is ReplicaState.STARTING:
                slot.state, slot.since_s = ReplicaState.READY, now
        log.info("replica %s: %s ready in %.1f s (boot %s)", slot.address.name, model, now - started, boot_s)

    def _unload(self, slot: Slot, model: str) -> None:
        time.sleep(self._settings.drain_grace_s)
        self._unload_model(slot, model)
        with self._lock:
            slot.unloading.discard(model)
            if slot.worker is not None:
                slot.worker.load_at_start = tuple(sorted(slot.ready))

    def _unload_model(self, slot: Slot, model: str) -> None:
        unload(slot.address, model, self._settings.load_timeout_s)
        deadline = self._clock() + self._settings.drain_timeout_s
        while loaded(slot.address, model) and self._clock() < deadline:
            time.sleep(0.1)

    def _drain(self, slot: Slot) -> None:
        time.sleep(self._settings.drain_grace_s)
        self._stop(slot)  # SIGTERM: Triton finishes the requests in flight, then exits

    def _stop(self, slot: Slot) -> None:
        worker = slot.worker
        if worker is not None:
            self._supervisor.remove(worker)
            worker.stop()
        with self._lock:
            slot.worker = None
            slot.state, slot.since_s = ReplicaState.STOPPED, self._clock()
            slot.ready.clear()
            slot.loading.clear()
            slot.unloading.clear()

    def _failed(self, slot: Slot, action: SlotAction, exc: BaseException) -> None:
        message = f"replica {slot.address.name}: {action.kind} {action.model} failed: {exc}"
        log.error(message)
        with self._lock:
            self.errors = [*self.errors[-19:], message]
            slot.loading.discard(action.model)
            slot.unloading.discard(action.model)
            running = slot.state is ReplicaState.READY and (slot.ready or slot.loading)
        if not running:
            self._stop(slot)

    def close(self) -> None:
        """Start no more actions and stop every replica process this set started (the supervisor
        stops the ones it started); actions in progress then fail fast on their stopped worker."""
        with self._lock:
            self._closed = True
            workers = [s.worker for slots in self.slots.values() for s in slots if s.worker is not None]
        self._executor.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            self._supervisor.remove(worker)
            worker.stop()


class LiveAddresses(Sequence[WorkerAddress]):
    """The running replicas as a sequence that is read afresh on every use (the deployer's
    workers: a rollout loads a new version where the model runs now)."""

    def __init__(self, replicas: ReplicaSet) -> None:
        self._replicas = replicas

    def __len__(self) -> int:
        return len(self._replicas.addresses())

    @overload
    def __getitem__(self, index: int) -> WorkerAddress: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[WorkerAddress]: ...

    def __getitem__(self, index: int | slice) -> WorkerAddress | Sequence[WorkerAddress]:
        return self._replicas.addresses()[index]

    def __iter__(self) -> Iterator[WorkerAddress]:
        return iter(self._replicas.addresses())


def _ewma(previous: float | None, value: float) -> float:
    return value if previous is None else _EWMA * value + (1 - _EWMA) * previous
