"""Generation through a decoupled Triton LLM model, one gRPC stream per request.

``stream_generation`` sends one request on its own bidirectional stream and yields a
``TextChunk`` per response until the one carrying ``finish_reason``. Each response is awaited
for at most ``idle_timeout_s``. When the consumer stops early (client disconnect, error), the
gRPC call is cancelled, which Triton forwards to the model as ``request.is_cancelled()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.utils import InferenceServerException

from gateway.errors import UpstreamError
from gateway.workers import Worker, map_triton_error
from scheduling.prefix_reuse import PromptPrefixes


@dataclass(frozen=True)
class GenerationRequest:
    """One generation as sent to the engine; ``prefixes`` are its prompt's block hashes, for the
    scheduler's prefix-reuse prediction (``scheduling.prefix_reuse``), not sent."""

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


@dataclass(frozen=True)
class TextChunk:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


def _tensor(name: str, value: np.ndarray, datatype: str) -> grpcclient.InferInput:
    tensor = grpcclient.InferInput(name, list(value.shape), datatype)
    tensor.set_data_from_numpy(value)
    return tensor


TRITON_PRIORITY_LEVELS = 3  # levels of Tier.triton_priority (scheduling/tenants.py)


def engine_priority(triton_priority: int) -> int | None:
    """The engine's ``priority`` input (higher = more important) for a Triton priority level
    (1 = most important, i.e. premium); None for 0, Triton's "default level"."""
    if triton_priority <= 0:
        return None
    return max(1, TRITON_PRIORITY_LEVELS + 1 - triton_priority)


def build_inputs(request: GenerationRequest) -> list[grpcclient.InferInput]:
    inputs = [
        _tensor("prompt", np.array([request.prompt.encode("utf-8")], dtype=np.object_), "BYTES"),
        _tensor("max_tokens", np.array([request.max_tokens], dtype=np.int32), "INT32"),
    ]
    optional: list[tuple[str, Any, Any, str]] = [
        ("temperature", request.temperature, np.float32, "FP32"),
        ("top_p", request.top_p, np.float32, "FP32"),
        ("top_k", request.top_k, np.int32, "INT32"),
        ("seed", request.seed, np.int64, "INT64"),
        ("priority", engine_priority(request.priority), np.int32, "INT32"),
    ]
    for name, value, dtype, datatype in optional:
        if value is not None:
            inputs.append(_tensor(name, np.array([value], dtype=dtype), datatype))
    if request.stop:
        stops = np.array([s.encode("utf-8") for s in request.stop], dtype=np.object_)
        inputs.append(_tensor("stop", stops, "BYTES"))
    return inputs


def _chunk(result: Any) -> TextChunk:
    text = result.as_numpy("text_output")
    finish = result.as_numpy("finish_reason")
    return TextChunk(
        text=text.reshape(-1)[0].decode("utf-8") if text is not None else "",
        finish_reason=(finish.reshape(-1)[0].decode() or None) if finish is not None else None,
        prompt_tokens=int(result.as_numpy("prompt_tokens").reshape(-1)[0]),
        completion_tokens=int(result.as_numpy("completion_tokens").reshape(-1)[0]),
    )


async def stream_generation(
    worker: Worker, model: str, request_id: str, request: GenerationRequest, idle_timeout_s: float = 60.0,
    version: int | None = None,
) -> AsyncIterator[TextChunk]:
    """Yield the model's chunks for ``request`` from ``worker`` (from ``version`` of the model, or
    Triton's default version when None); see the module docstring."""
    sent = asyncio.Event()
    done = asyncio.Event()
    payload = {"model_name": model, "inputs": build_inputs(request), "request_id": request_id,
               "priority": request.priority, "model_version": "" if version is None else str(version)}

    async def requests() -> AsyncIterator[dict[str, Any]]:
        yield payload
        sent.set()
        await done.wait()  # keep our half of the stream open until the answer is complete

    worker.in_flight += 1
    call = worker.client.stream_infer(requests())
    try:
        responses = call.__aiter__()
        while True:
            try:
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that
                # races a response arriving, which would leave the stream running after a disconnect.
                async with asyncio.timeout(idle_timeout_s):
                    result, error = await responses.__anext__()
            except StopAsyncIteration:
                raise UpstreamError(f"model {model} closed the stream early") from None
            except TimeoutError:
                raise UpstreamError(f"model {model} sent nothing for {idle_timeout_s:.0f} s") from None
            except InferenceServerException as exc:
                raise map_triton_error(exc, model) from exc
            if error is not None:
                raise map_triton_error(error, model)
            chunk = _chunk(result)
            yield chunk
            if chunk.finish_reason is not None:
                return
    finally:
        worker.in_flight -= 1
        done.set()
        call.cancel()
