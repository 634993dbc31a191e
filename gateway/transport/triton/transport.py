"""``TritonTransport``: the gateway's ``Transport`` over real ``tritonserver`` workers (gRPC).

It owns the ``WorkerPool`` (clients, readiness, live KV), the row coalescers of batched models
and each worker's generation streams, and translates every Triton error with
``map_triton_error``. A call that fails with ``WorkerFailedError`` (the worker crashed or cannot be
reached) marks its worker down at once (``WorkerPool.mark_down``) before the error goes up.
The scheduling core chooses the worker of every inference call; only
``model_metadata``, which no scheduler sees, asks the ready workers in turn until one answers.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import tritonclient.grpc.aio as grpcclient
from tritonclient.utils import InferenceServerException

from gateway.errors import GatewayError, PermissionDeniedError, UnavailableError, WorkerFailedError
from gateway.transport.protocol import Columns, GenerationRequest, RowCall, Tensor, TextChunk, WorkerStatus
from gateway.transport.triton.errors import map_triton_error
from gateway.transport.triton.generation import stream_generation
from gateway.transport.triton.rows import RowInference
from gateway.transport.triton.workers import Worker, WorkerPool
from scheduling.capacity import CapacityProfile
from scheduling.workers import WorkerView
from settings.workers import WorkerAddress

KSERVE_TIMEOUT_S = 60.0
METADATA_TIMEOUT_S = 10.0
T = TypeVar("T")


class TritonTransport:
    """See the module docstring; ``connect`` builds one for the configured workers."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self._rows = RowInference()

    @classmethod
    def connect(cls, addresses: Sequence[WorkerAddress], poll_interval_s: float = 1.0,
                llm_models: frozenset[str] = frozenset(),
                discover: Callable[[], Sequence[WorkerAddress]] | None = None) -> TritonTransport:
        """Clients for ``addresses``; with ``discover``, the workers it returns at each refresh."""
        return cls(WorkerPool.connect(addresses, poll_interval_s, llm_models, discover))

    @property
    def on_refresh(self) -> list[Callable[[], None]]:
        return self.pool.on_refresh

    async def start(self) -> None:
        await self.pool.start()

    async def close(self) -> None:
        await self.pool.close()

    async def refresh(self) -> None:
        await self.pool.refresh()

    def views(self, profiles: Mapping[str, CapacityProfile]) -> list[WorkerView]:
        return self.pool.views(profiles)

    def served_models(self) -> set[str]:
        return self.pool.served_models()

    def ready_models(self) -> set[str]:
        return self.pool.ready_models()

    def workers(self) -> list[WorkerStatus]:
        return [WorkerStatus(w.address.name, w.address.models, w.ready_models, w.streams.opened, w.streams.idle)
                for w in self.pool.workers]

    def has_worker(self, worker_id: str) -> bool:
        return any(w.address.name == worker_id for w in self.pool.workers)

    async def _watched(self, worker: Worker, call: Awaitable[T]) -> T:
        try:
            return await call
        except WorkerFailedError:
            self.pool.mark_down(worker)
            raise

    async def infer_rows(self, call: RowCall, columns: Columns) -> Columns:
        worker = self.pool.worker(call.worker_id)
        return await self._watched(worker, self._rows.infer(worker, call, columns))

    async def infer_tensors(self, worker_id: str, model: str, version: int, inputs: Sequence[Tensor],
                            outputs: Sequence[str], priority: int, request_id: str) -> list[Tensor]:
        worker = self.pool.worker(worker_id)
        infer_inputs = []
        for tensor in inputs:
            infer_input = grpcclient.InferInput(tensor.name, list(tensor.array.shape), tensor.datatype)
            infer_input.set_data_from_numpy(tensor.array)
            infer_inputs.append(infer_input)
        requested = [grpcclient.InferRequestedOutput(name) for name in outputs] or None
        try:
            result = await worker.client.infer(model, infer_inputs, model_version=str(version), outputs=requested,
                                               request_id=request_id, priority=priority,
                                               client_timeout=KSERVE_TIMEOUT_S)
        except InferenceServerException as exc:
            error = map_triton_error(exc, model, version)
            if isinstance(error, WorkerFailedError):
                self.pool.mark_down(worker)
            raise error from exc
        return [Tensor(o.name, o.datatype, result.as_numpy(o.name)) for o in result.get_response().outputs]

    async def generate(self, worker_id: str, model: str, version: int | None, request_id: str,
                       request: GenerationRequest) -> AsyncGenerator[TextChunk, None]:
        worker = self.pool.worker(worker_id)
        chunks = stream_generation(worker, model, request_id, request, version=version)
        try:
            async for chunk in chunks:
                yield chunk
        except WorkerFailedError:
            self.pool.mark_down(worker)
            raise
        finally:
            await chunks.aclose()

    async def model_metadata(self, model: str, version: int, regions: frozenset[str]) -> dict[str, Any]:
        failure: GatewayError = UnavailableError(f"model {model} has no ready worker", code="model_cold",
                                                 retry_after_s=5)
        for worker in self._metadata_candidates(model, regions):
            try:
                meta: dict[str, Any] = await worker.client.get_model_metadata(
                    model, str(version), as_json=True, client_timeout=METADATA_TIMEOUT_S)
                return meta
            except InferenceServerException as exc:
                failure = map_triton_error(exc, model, version)
        raise failure

    def _metadata_candidates(self, model: str, regions: frozenset[str]) -> list[Worker]:
        serving = [w for w in self.pool.workers if model in w.address.models]
        allowed = [w for w in serving if not regions or w.address.region in regions]
        if serving and not allowed:
            raise PermissionDeniedError(f"model {model} is not served in a region your tenant allows",
                                        code="residency")
        return [w for w in allowed if model in w.ready_models]
