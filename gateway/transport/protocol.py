"""The seam between the gateway and the workers that run models: one protocol, ``Transport``.

Everything above this seam (routes, admission, the dispatcher) speaks in the gateway's terms:
worker ids the scheduling core chose, model names and versions, numpy columns, generation
requests and text chunks. Everything below it speaks Triton (``gateway.transport.triton``): gRPC
clients, readiness polling, row coalescing, reusable generation streams, ``InferInput`` tensors.
Unit tests of the gateway run it in-process against a fake transport; production and the
integration tests run ``TritonTransport`` against real ``tritonserver`` workers.

Contract of every call: it raises only ``gateway.errors.GatewayError`` subclasses for failures a
client should hear about (bad input -> ``InvalidRequestError``, saturated or cold model ->
``UnavailableError``, a worker that crashed or cannot be reached -> ``WorkerFailedError``, after
which that worker reads as not ready until it answers again; a worker that answered with an error
-> ``UpstreamError``); it is bounded in time; and a
caller that stops consuming ``generate`` (``aclose`` or cancellation) cancels the generation on
the worker.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from scheduling.capacity import CapacityProfile
from scheduling.prediction.prefix_reuse import PromptPrefixes
from scheduling.workers import WorkerView

Columns = dict[str, np.ndarray]  # input or output name -> rows (first axis) of one call


@dataclass(frozen=True)
class Tensor:
    """A named tensor with its KServe v2 datatype (``FP32``, ``BYTES``, ...)."""

    name: str
    datatype: str
    array: np.ndarray


@dataclass(frozen=True)
class RowCall:
    """Where and how one batched request runs: rows of ``columns`` go to ``model`` (``version``,
    or the worker's default when None) on ``worker_id`` in calls of at most ``max_batch_rows``
    rows, at Triton ``priority`` (1 = most urgent); ``instances`` is the model's instance count."""

    worker_id: str
    model: str
    version: int | None
    outputs: tuple[str, ...]
    priority: int
    request_id: str
    max_batch_rows: int
    instances: int = 1
    timeout_s: float = 60.0


@dataclass(frozen=True)
class GenerationRequest:
    """One generation as sent to the engine; ``prefixes`` are its prompt's block hashes, for the
    scheduler's prefix-reuse prediction (``scheduling.prediction.prefix_reuse``), not sent.

    ``continuation``: token ids this generation already produced (and the client already has),
    on a resume after its worker failed; the engine feeds prompt + them, advances a seeded
    sampler past them, and goes on as if it had generated them itself; ``max_tokens`` and the
    usage counts stay those of the whole generation."""

    prompt: str
    prompt_tokens: int
    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    priority: int = 0
    prefixes: PromptPrefixes | None = None
    continuation: tuple[int, ...] = ()
    grammar: str = ""  # the output must follow it (gateway/structured_output.py); "" unconstrained


@dataclass(frozen=True)
class TextChunk:
    """One response of a generation; the last one carries ``finish_reason``. ``token_ids``: the
    tokens whose text this chunk completes (what a resume sends back as ``continuation``)."""

    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class WorkerStatus:
    """What ``/metrics`` reports of one worker."""

    name: str
    models: tuple[str, ...]
    ready_models: frozenset[str]
    streams_opened: int = 0
    streams_idle: int = 0


class Transport(Protocol):
    """The workers as the gateway sees them; see the module docstring for the error contract."""

    @property
    def on_refresh(self) -> list[Callable[[], None]]:
        """Callbacks run after every readiness refresh (the dispatcher appends its own)."""
        ...

    async def start(self) -> None:
        """Connect and read every worker's readiness once."""

    async def close(self) -> None:
        """Stop polling and close every connection."""

    async def refresh(self) -> None:
        """Read every worker's readiness (and live KV) now, then call ``on_refresh``."""

    def views(self, profiles: Mapping[str, CapacityProfile]) -> list[WorkerView]:
        """The scheduling core's view of every worker; ``profiles`` by pool name."""
        ...

    def served_models(self) -> set[str]:
        """Models some worker is configured to serve."""
        ...

    def ready_models(self) -> set[str]:
        """Models with a READY version on some worker."""
        ...

    def workers(self) -> list[WorkerStatus]:
        """Every worker's status, in configuration order."""
        ...

    def has_worker(self, worker_id: str) -> bool:
        """Whether ``worker_id`` (a scheduler dispatch's worker) is still known."""
        ...

    async def infer_rows(self, call: RowCall, columns: Columns) -> Columns:
        """``call.outputs`` for the rows of ``columns`` (equal row counts), in row order."""
        ...

    async def infer_tensors(self, worker_id: str, model: str, version: int, inputs: Sequence[Tensor],
                            outputs: Sequence[str], priority: int, request_id: str) -> list[Tensor]:
        """One KServe-style call; ``outputs`` empty means every output of the model."""
        ...

    def generate(self, worker_id: str, model: str, version: int | None, request_id: str,
                 request: GenerationRequest) -> AsyncGenerator[TextChunk, None]:
        """The chunks of one generation, ending with the chunk that has ``finish_reason``."""
        ...

    async def model_metadata(self, model: str, version: int, regions: frozenset[str]) -> dict[str, Any]:
        """The model's KServe metadata (``platform``, ``inputs``, ``outputs``) from any ready worker
        in ``regions`` (all regions when empty): not scheduled, the answer is the same on every
        worker. ``PermissionDeniedError`` if it is served only outside ``regions``."""
        ...
