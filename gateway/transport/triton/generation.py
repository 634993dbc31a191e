"""Generation through a decoupled Triton LLM model, one request at a time on a gRPC stream.

``stream_generation`` sends one request on a bidirectional stream of the worker's
``GenerationStreams`` (reused once an earlier generation on it has ended) and yields a
``TextChunk`` per response until the one carrying ``finish_reason``; then the stream goes back to
the pool. Each response is awaited for at most ``idle_timeout_s``. When the consumer stops early
(client disconnect, error), the gRPC call is cancelled, which Triton forwards to the model as
``request.is_cancelled()``, and the stream is closed. A reused stream that fails before its first
response (its connection died while it was idle) is replaced once by a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import numpy as np
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import InferResult
from tritonclient.utils import InferenceServerException

from gateway.errors import UpstreamError, WorkerFailedError
from gateway.transport.protocol import GenerationRequest, TextChunk
from gateway.transport.triton.errors import map_triton_error, model_label
from gateway.transport.triton.streams import GenerationStream
from gateway.transport.triton.workers import Worker


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
    if request.grammar:
        inputs.append(_tensor("grammar", np.array([request.grammar.encode("utf-8")], dtype=np.object_), "BYTES"))
    if request.continuation:
        inputs.append(_tensor("continuation", np.array(request.continuation, dtype=np.int32), "INT32"))
    return inputs


def _chunk(result: Any) -> TextChunk | None:
    """The chunk a response carries; None for an empty response that only flags a request final
    (ours, or a previous request's on a reused stream)."""
    completion = result.as_numpy("completion_tokens") if result is not None else None
    if completion is None:
        return None
    text = result.as_numpy("text_output")
    finish = result.as_numpy("finish_reason")
    token_ids = result.as_numpy("token_ids")
    return TextChunk(
        text=text.reshape(-1)[0].decode("utf-8") if text is not None else "",
        finish_reason=(finish.reshape(-1)[0].decode() or None) if finish is not None else None,
        prompt_tokens=int(result.as_numpy("prompt_tokens").reshape(-1)[0]),
        completion_tokens=int(completion.reshape(-1)[0]),
        token_ids=tuple(int(t) for t in token_ids.reshape(-1)) if token_ids is not None else (),
    )


async def _next_response(stream: GenerationStream, model: str, version: int | None,
                         idle_timeout_s: float) -> tuple[InferResult | None, InferenceServerException | None]:
    try:
        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation that races a
        # response arriving, which would leave the stream running after a disconnect.
        async with asyncio.timeout(idle_timeout_s):
            return await stream.next()
    except TimeoutError:
        raise UpstreamError(f"{model_label(model, version)} sent nothing for {idle_timeout_s:.0f} s") from None


async def stream_generation(
    worker: Worker, model: str, request_id: str, request: GenerationRequest, idle_timeout_s: float = 60.0,
    version: int | None = None,
) -> AsyncGenerator[TextChunk, None]:
    """Yield the model's chunks for ``request`` from ``worker`` (from ``version`` of the model, or
    Triton's default version when None); see the module docstring."""
    payload = {"model_name": model, "inputs": build_inputs(request), "request_id": request_id,
               "priority": request.priority, "model_version": "" if version is None else str(version)}
    stream = worker.streams.acquire()
    ended = answered = False
    try:
        stream.send(payload)
        while True:
            try:
                result, error = await _next_response(stream, model, version, idle_timeout_s)
            except (StopAsyncIteration, InferenceServerException) as exc:
                if stream.reused and not answered:
                    # An idle stream that died with its connection (a restarted worker): the
                    # request never reached the model, so it goes once more on a new stream.
                    worker.streams.discard(stream)
                    stream = worker.streams.acquire(fresh=True)
                    stream.send(payload)
                    continue
                if isinstance(exc, StopAsyncIteration):  # the connection ended: the worker went away
                    raise WorkerFailedError(f"the worker serving {model_label(model, version)} closed the stream "
                                            "early") from None
                raise map_triton_error(exc, model, version) from exc
            answered = True
            if error is not None:
                raise map_triton_error(error, model, version)
            chunk = _chunk(result)
            if chunk is None:
                continue
            ended = chunk.finish_reason is not None  # nothing more of this request can arrive
            yield chunk
            if ended:
                return
    finally:
        if ended:
            worker.streams.release(stream)
        else:
            worker.streams.discard(stream)
