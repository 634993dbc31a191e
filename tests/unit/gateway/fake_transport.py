"""An in-memory ``Transport`` for the gateway's in-process unit tests (never the proof that serving
works: the integration tests run real Triton).

Workers come from the real stack configuration. Batched models answer with deterministic values
computed from their inputs (an embedding is a function of the text, a rerank score of the pair),
LLMs with a scripted list of chunks; ``gate`` holds every call until it is set, so tests can fill
a worker and watch the queue; ``fail_with`` makes the next calls raise a taxonomy error;
``crashes`` makes that many next calls fail as a crashed worker would (``WorkerFailedError``; a
generation after ``crash_after_chunks`` chunks); a generation with a ``continuation`` skips the
scripted chunks whose token ids it holds; every call and every cancelled generation is recorded.
``addresses`` (default: the configured workers) may name more replica slots; ``down`` lists workers
with nothing ready (a stopped slot; at first every slot past the configured workers), ``unloaded``
models loaded nowhere (scaled to zero).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gateway.errors import GatewayError, PermissionDeniedError, UnavailableError, WorkerFailedError
from gateway.transport.protocol import Columns, GenerationRequest, RowCall, Tensor, TextChunk, WorkerStatus
from scheduling.capacity import CapacityProfile
from scheduling.workers import WorkerView
from settings.stack import StackConfig
from settings.workers import WorkerAddress, worker_addresses

EMBEDDING_DIMENSIONS = 8


def fake_vector(text: bytes) -> np.ndarray:
    digest = hashlib.sha256(text).digest()
    return np.frombuffer(digest[:EMBEDDING_DIMENSIONS * 4], dtype=np.uint32).astype(np.float32) / 2**32


def fake_score(query: bytes, document: bytes) -> float:
    """Word overlap of the pair: deterministic and ordered the way a reader expects."""
    asked = set(query.lower().split())
    return float(len(asked & set(document.lower().split()))) / max(1, len(asked))


@dataclass
class Generation:
    worker_id: str
    model: str
    version: int | None
    request_id: str
    request: GenerationRequest
    finished: bool = False
    cancelled: bool = False


@dataclass
class FakeTransport:
    config: StackConfig
    on_refresh: list[Callable[[], None]] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    chunks: list[TextChunk | GatewayError] = field(default_factory=list)
    fail_with: GatewayError | None = None
    ready: bool = True
    extra_versions: dict[str, frozenset[int]] = field(default_factory=dict)  # loaded beside the configured one
    row_calls: list[RowCall] = field(default_factory=list)
    tensor_calls: list[tuple[str, str, int]] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    started: bool = False
    addresses: list[WorkerAddress] = field(default_factory=list)
    down: set[str] = field(default_factory=set)
    unloaded: set[str] = field(default_factory=set)
    crashes: int = 0
    crash_after_chunks: int = 0
    down_on_crash: bool = False  # a crash takes every worker down (not ready) until ``ready`` is set again

    def __post_init__(self) -> None:
        configured = worker_addresses(self.config)
        self.addresses = self.addresses or configured
        # slots past a pool's configured workers have no process until control starts one
        self.down |= {a.name for a in self.addresses} - {a.name for a in configured}
        self.gate.set()
        if not self.chunks:
            self.script_text(["Paris", " is", " the", " capital."])

    def script_text(self, parts: Sequence[str], prompt_tokens: int = 20, finish_reason: str = "stop") -> None:
        """Make each generation answer ``parts``, one chunk each, the last with ``finish_reason``."""
        self.chunks = [TextChunk(text, finish_reason if i == len(parts) - 1 else None, prompt_tokens, i + 1,
                                 token_ids=(100 + i,))
                       for i, text in enumerate(parts)]

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.started = False

    async def refresh(self) -> None:
        for callback in self.on_refresh:
            callback()

    def _ready_versions(self, address: WorkerAddress) -> dict[str, frozenset[int]]:
        if not self.ready or address.name in self.down:
            return {}
        versions = {m.name: frozenset({m.version}) | self.extra_versions.get(m.name, frozenset())
                    for m in self.config.models}
        return {model: versions[model] for model in address.models if model not in self.unloaded}

    def views(self, profiles: Mapping[str, CapacityProfile]) -> list[WorkerView]:
        return [WorkerView(a.name, a.pool, a.region, profiles[a.pool], ready, healthy=bool(ready))
                for a in self.addresses for ready in [self._ready_versions(a)]]

    def served_models(self) -> set[str]:
        return {m for a in self.addresses for m in a.models}

    def ready_models(self) -> set[str]:
        return {m for a in self.addresses for m in self._ready_versions(a)}

    def workers(self) -> list[WorkerStatus]:
        return [WorkerStatus(a.name, a.models, frozenset(self._ready_versions(a))) for a in self.addresses]

    def has_worker(self, worker_id: str) -> bool:
        return any(a.name == worker_id for a in self.addresses)

    async def _call(self) -> None:
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with

    def _crash(self) -> None:
        if self.crashes > 0:
            self.crashes -= 1
            if self.down_on_crash:
                self.ready = False
                for callback in self.on_refresh:
                    callback()
            raise WorkerFailedError("the worker failed or cannot be reached")

    async def infer_rows(self, call: RowCall, columns: Columns) -> Columns:
        self.row_calls.append(call)
        await self._call()
        self._crash()
        if "text" in columns:
            return {"embedding": np.stack([fake_vector(row[0]) for row in columns["text"]])}
        scores = [fake_score(q[0], d[0]) for q, d in zip(columns["query"], columns["document"], strict=True)]
        return {"score": np.array(scores, dtype=np.float32).reshape(-1, 1)}

    async def infer_tensors(self, worker_id: str, model: str, version: int, inputs: Sequence[Tensor],
                            outputs: Sequence[str], priority: int, request_id: str) -> list[Tensor]:
        self.tensor_calls.append((worker_id, model, version))
        await self._call()
        self._crash()
        first = inputs[0].array
        rows = first.shape[0] if first.ndim else 1
        class_ids = np.arange(rows, dtype=np.int64).reshape(rows, 1)
        return [Tensor("class_id", "INT64", class_ids)]

    async def generate(self, worker_id: str, model: str, version: int | None, request_id: str,
                       request: GenerationRequest) -> AsyncGenerator[TextChunk, None]:
        generation = Generation(worker_id, model, version, request_id, request)
        self.generations.append(generation)
        skip = len(request.continuation)
        try:
            for index, item in enumerate(self.chunks):
                await self._call()
                if isinstance(item, GatewayError):
                    raise item
                if skip > 0:
                    skip -= len(item.token_ids)
                    continue
                if index >= self.crash_after_chunks:
                    self._crash()
                yield item
            generation.finished = True
        finally:
            generation.cancelled = not generation.finished

    async def model_metadata(self, model: str, version: int, regions: frozenset[str]) -> dict[str, Any]:
        serving = [a for a in self.addresses if model in a.models]
        if serving and regions and not any(a.region in regions for a in serving):
            raise PermissionDeniedError(f"model {model} is not served in a region your tenant allows",
                                        code="residency")
        if not self.ready:
            raise UnavailableError(f"model {model} has no ready worker", code="model_cold", retry_after_s=5)
        return {"name": model, "versions": [str(version)], "platform": "python",
                "inputs": [{"name": "features", "datatype": "FP32", "shape": ["-1", "64"]}],
                "outputs": [{"name": "class_id", "datatype": "INT64", "shape": ["-1", "1"]}]}
