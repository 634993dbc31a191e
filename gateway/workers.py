"""The gateway's view of Triton workers: one gRPC client each, readiness, and worker choice.

``WorkerPool`` keeps a ``tritonclient.grpc.aio`` client per worker (HTTP/2 multiplexes every
request over it), polls each worker's per-model readiness every ``poll_interval_s`` (bounded by a
per-call timeout) and picks, for a model, the ready worker with the fewest requests in flight.
Scheduling proper (admission, fair queueing, placement by GPU type) comes from ``scheduling/``;
this is the transport it dispatches through. ``map_triton_error`` is the one translation of
Triton's errors into the gateway's taxonomy.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import tritonclient.grpc.aio as grpcclient
from tritonclient.utils import InferenceServerException

from control.supervisor import WorkerAddress
from gateway.errors import (
    GatewayError,
    InvalidRequestError,
    PermissionDeniedError,
    UnavailableError,
    UpstreamError,
)

# Prefix of the messages our python backends raise for bad input (python_backends.batching).
_INVALID_INPUT_PREFIX = "input '"
_GRPC_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def map_triton_error(exc: InferenceServerException, model: str) -> GatewayError:
    """Translate a Triton error into the gateway's taxonomy."""
    message = exc.message() or str(exc)
    status = exc.status() or ""
    if _INVALID_INPUT_PREFIX in message or "INVALID_ARGUMENT" in status:
        detail = message[message.find(_INVALID_INPUT_PREFIX):] if _INVALID_INPUT_PREFIX in message else message
        return InvalidRequestError(detail, code="invalid_input")
    if "queue size" in message.lower() or "UNAVAILABLE" in status or "RESOURCE_EXHAUSTED" in status:
        return UnavailableError(f"model {model} is saturated; retry shortly", retry_after_s=1)
    if "NOT_FOUND" in status or "not ready" in message.lower() or "unknown model" in message.lower():
        return UnavailableError(f"model {model} is not loaded on any ready worker",
                                code="model_cold", retry_after_s=5)
    return UpstreamError(f"worker failed serving model {model}")


@dataclass
class Worker:
    address: WorkerAddress
    client: grpcclient.InferenceServerClient
    ready_models: frozenset[str] = frozenset()
    in_flight: int = 0


@dataclass
class WorkerPool:
    workers: list[Worker]
    poll_interval_s: float = 1.0
    poll_timeout_s: float = 2.0
    _poller: asyncio.Task[None] | None = field(default=None, repr=False)

    @classmethod
    def connect(cls, addresses: Sequence[WorkerAddress], poll_interval_s: float = 1.0) -> WorkerPool:
        options = [("grpc.max_send_message_length", _GRPC_MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", _GRPC_MAX_MESSAGE_BYTES)]
        workers = [
            Worker(a, grpcclient.InferenceServerClient(f"{a.host}:{a.grpc_port}", channel_args=options))
            for a in addresses
        ]
        return cls(workers, poll_interval_s)

    async def start(self) -> None:
        await self.refresh()
        self._poller = asyncio.create_task(self._poll_forever(), name="worker-readiness")

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for worker in self.workers:
            await worker.client.close()

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval_s)
            await self.refresh()

    async def refresh(self) -> None:
        await asyncio.gather(*(self._refresh_worker(w) for w in self.workers))

    async def _refresh_worker(self, worker: Worker) -> None:
        ready = set()
        for model in worker.address.models:
            try:
                if await worker.client.is_model_ready(model, client_timeout=self.poll_timeout_s):
                    ready.add(model)
            except InferenceServerException:
                break  # unreachable: nothing on it is ready
        worker.ready_models = frozenset(ready)

    def served_models(self) -> set[str]:
        return {m for w in self.workers for m in w.address.models}

    def ready_models(self) -> set[str]:
        return {m for w in self.workers for m in w.ready_models}

    def pick(self, model: str, regions: frozenset[str] = frozenset()) -> Worker:
        """The ready worker serving ``model`` (in one of ``regions``, if any are given) with the
        fewest requests in flight."""
        serving = [w for w in self.workers if model in w.address.models]
        allowed = [w for w in serving if not regions or w.address.region in regions]
        if serving and not allowed:
            raise PermissionDeniedError(f"model {model} is not served in a region your tenant allows",
                                        code="residency")
        candidates = [w for w in allowed if model in w.ready_models]
        if not candidates:
            raise UnavailableError(f"model {model} has no ready worker", code="model_cold",
                                   retry_after_s=5)
        return min(candidates, key=lambda w: w.in_flight)

    @contextlib.asynccontextmanager
    async def lease(self, model: str, regions: frozenset[str] = frozenset()) -> AsyncIterator[Worker]:
        """A worker for one request, counted as in flight until the block exits."""
        worker = self.pick(model, regions)
        worker.in_flight += 1
        try:
            yield worker
        finally:
            worker.in_flight -= 1
