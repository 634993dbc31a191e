"""Triton workers: one gRPC client each, their readiness and live KV.

``WorkerPool`` keeps a ``tritonclient.grpc.aio`` client per worker slot (every worker a pool may
have when autoscaling, ``settings.workers.worker_addresses``; HTTP/2 multiplexes every request over
it), polls each worker's READY model versions every ``poll_interval_s`` (one
repository-index call, bounded by a per-call timeout) and, on workers serving an LLM, the
engine's live KV pool from Triton's metrics port (``shunter_llm_kv_blocks_*``, where the engine
reports them). ``views`` turns that into the scheduling core's ``WorkerView``s; the core decides
where each request goes. Each worker also holds its reusable generation streams
(``streams.GenerationStreams``), closed when it is unreachable.

With ``discover`` (pools with ``discovery: dns``, a Kubernetes pool's pods behind a headless
Service), each refresh first asks it for the workers there are now (off the event loop): a new
pod gets a client, a pod that left is closed and dropped (a call still bound to it ends with
``worker_gone``); a pod keeps its name (``<pool>-<address>``) while it stays.

A worker that fails a call (crashed, unreachable: ``mark_down``) is down at once, not at the next
poll: nothing is ready on it, the ``on_refresh`` callbacks run (so the scheduler stops placing
there), and it is polled every ``recovery_poll_s`` until a model is READY on it again, so that
readiness returns within that interval of Triton's; so is a worker a refresh finds no longer ready.
A worker that has not been ready (a replica slot the capacity controller has not started) is
only polled with the others, every ``poll_interval_s``. gRPC's reconnect backoff (1 s growing to
120 s by default, during which calls fail without trying) is capped at ``MAX_RECONNECT_BACKOFF_MS``:
with the default, ``/readyz`` lagged a restarted worker by seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
import tritonclient.grpc.aio as grpcclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from gateway.errors import UnavailableError
from gateway.periodic import start_periodic, stop
from gateway.transport.triton.streams import GenerationStreams
from scheduling.capacity import CapacityProfile
from scheduling.workers import WorkerView
from settings.workers import WorkerAddress

_GRPC_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# gRPC's default reconnect backoff grows towards 120 s, during which calls fail without trying:
# that hides a restarted worker, and a replica slot (autoscaling) whose process starts later (measured
# here: a slot polled dead for 3 min was seen 11 s after its server started). Capped, a restarted or
# started worker is seen within about one readiness poll.
MAX_RECONNECT_BACKOFF_MS = 250
RECOVERY_POLL_S = 0.2
_RECONNECT_BACKOFF = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                      ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS)]


@dataclass
class Worker:
    address: WorkerAddress
    client: grpcclient.InferenceServerClient
    ready_versions: dict[str, frozenset[int]] = field(default_factory=dict)
    kv_total_tokens: int | None = None
    kv_used_tokens: int | None = None
    streams: GenerationStreams = field(init=False)

    def __post_init__(self) -> None:
        self.streams = GenerationStreams(self.client)

    @property
    def ready_models(self) -> frozenset[str]:
        """Models with at least one version READY on this worker."""
        return frozenset(name for name, versions in self.ready_versions.items() if versions)


def _connect(address: WorkerAddress) -> Worker:
    options = [("grpc.max_send_message_length", _GRPC_MAX_MESSAGE_BYTES),
               ("grpc.max_receive_message_length", _GRPC_MAX_MESSAGE_BYTES), *_RECONNECT_BACKOFF]
    return Worker(address, grpcclient.InferenceServerClient(f"{address.host}:{address.grpc_port}",
                                                            channel_args=options))


@dataclass
class WorkerPool:
    workers: list[Worker]
    poll_interval_s: float = 1.0
    poll_timeout_s: float = 2.0
    llm_models: frozenset[str] = frozenset()
    on_refresh: list[Callable[[], None]] = field(default_factory=list)
    discover: Callable[[], Sequence[WorkerAddress]] | None = None
    recovery_poll_s: float = RECOVERY_POLL_S
    _poller: asyncio.Task[None] | None = field(default=None, repr=False)
    _recovering: dict[str, asyncio.Task[None]] = field(default_factory=dict, repr=False)
    _http: httpx.AsyncClient | None = field(default=None, repr=False)

    @classmethod
    def connect(cls, addresses: Sequence[WorkerAddress], poll_interval_s: float = 1.0,
                llm_models: frozenset[str] = frozenset(),
                discover: Callable[[], Sequence[WorkerAddress]] | None = None) -> WorkerPool:
        return cls([_connect(a) for a in addresses], poll_interval_s, llm_models=llm_models, discover=discover)

    async def start(self) -> None:
        self._http = httpx.AsyncClient(timeout=self.poll_timeout_s)
        await self.refresh()
        self._poller = start_periodic(self.refresh, self.poll_interval_s, "worker-readiness")

    async def close(self) -> None:
        await stop(self._poller)
        for task in list(self._recovering.values()):
            await stop(task)
        for worker in self.workers:
            worker.streams.close()
            await worker.client.close()
        if self._http is not None:
            await self._http.aclose()

    async def refresh(self) -> None:
        if self.discover is not None:
            await self.reconcile(await asyncio.to_thread(self.discover))
        was_ready = {w.address.name for w in self.workers if w.ready_models}
        await asyncio.gather(*(self._refresh_worker(w) for w in self.workers))
        self._changed()
        for worker in self.workers:  # a worker never ready (a replica slot not started) is left to this poll
            if not worker.ready_models and worker.address.name in was_ready:
                self._recover(worker)

    def _changed(self) -> None:
        for callback in self.on_refresh:
            callback()

    async def reconcile(self, addresses: Sequence[WorkerAddress]) -> None:
        """Make the pool exactly ``addresses``: connect new ones, close and drop the others."""
        wanted = {a.name: a for a in addresses}
        kept = [w for w in self.workers if w.address.name in wanted]
        for worker in self.workers:
            if worker not in kept:
                worker.streams.close()
                await worker.client.close()
        known = {w.address.name for w in kept}
        self.workers = kept + [_connect(a) for name, a in wanted.items() if name not in known]

    def mark_down(self, worker: Worker) -> None:
        """``worker`` failed a call (crashed or unreachable): down now; see the module docstring."""
        if worker.ready_versions:
            worker.ready_versions = {}
            worker.kv_total_tokens = worker.kv_used_tokens = None
            worker.streams.close()
            self._changed()
        self._recover(worker)

    def _recover(self, worker: Worker) -> None:
        """Poll a down worker every ``recovery_poll_s`` until a model is ready on it (one task)."""
        name = worker.address.name
        if name in self._recovering or self._poller is None:
            return

        async def poll_until_ready() -> None:
            try:
                while not worker.ready_models:
                    await asyncio.sleep(self.recovery_poll_s)
                    await self._refresh_worker(worker)
                self._changed()
            finally:
                self._recovering.pop(name, None)

        self._recovering[name] = asyncio.create_task(poll_until_ready(), name=f"recover-{name}")

    async def _refresh_worker(self, worker: Worker) -> None:
        ready: dict[str, set[int]] = {}
        try:
            index = await worker.client.get_model_repository_index(as_json=True,
                                                                    client_timeout=self.poll_timeout_s)
        except InferenceServerException:
            index = {}  # unreachable: nothing on it is ready, and its idle streams are dead
            worker.streams.close()
        for entry in index.get("models", []):
            name, version = entry.get("name"), str(entry.get("version", ""))
            if name in worker.address.models and entry.get("state") == "READY" and version.isdigit():
                ready.setdefault(name, set()).add(int(version))
        worker.ready_versions = {name: frozenset(versions) for name, versions in ready.items()}
        if self.llm_models & set(worker.address.models):
            await self._refresh_kv(worker)

    async def _refresh_kv(self, worker: Worker) -> None:
        """Read the LLM engine's KV pool (blocks x block size) from the worker's metrics port."""
        if self._http is None:
            return
        address = worker.address
        try:
            response = await self._http.get(f"http://{address.host}:{address.metrics_port}/metrics")
            families = {f.name: f for f in text_string_to_metric_families(response.text)}
        except (httpx.HTTPError, ValueError):
            worker.kv_total_tokens = worker.kv_used_tokens = None
            return
        def total(name: str) -> float | None:
            family = families.get(name)
            return sum(s.value for s in family.samples) if family and family.samples else None
        used, blocks = total("shunter_llm_kv_blocks_used"), total("shunter_llm_kv_blocks_total")
        block_family = families.get("shunter_llm_kv_block_tokens")
        block_tokens = max((s.value for s in block_family.samples), default=0.0) if block_family else 0.0
        if used is None or not blocks or not block_tokens:
            worker.kv_total_tokens = worker.kv_used_tokens = None
            return
        worker.kv_total_tokens, worker.kv_used_tokens = int(blocks * block_tokens), int(used * block_tokens)

    def worker(self, name: str) -> Worker:
        """The worker called ``name`` (the scheduler's worker id)."""
        for worker in self.workers:
            if worker.address.name == name:
                return worker
        raise UnavailableError(f"worker {name} is gone", code="worker_gone", retry_after_s=1)

    def views(self, profiles: Mapping[str, CapacityProfile]) -> list[WorkerView]:
        """The scheduling core's view of every worker; ``profiles`` by pool name."""
        return [
            WorkerView(w.address.name, w.address.pool, w.address.region, profiles[w.address.pool],
                       dict(w.ready_versions),
                       healthy=bool(w.ready_models), kv_total_tokens=w.kv_total_tokens,
                       kv_used_tokens=w.kv_used_tokens)
            for w in self.workers
        ]

    def served_models(self) -> set[str]:
        return {m for w in self.workers for m in w.address.models}

    def ready_models(self) -> set[str]:
        return {m for w in self.workers for m in w.ready_models}
