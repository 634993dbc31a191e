"""From an OpenAI chat/completions body to a ``GenerationRequest``, and back to OpenAI JSON.

Shared by ``/v1/chat/completions`` and ``/v1/completions``: parameter checks, token counting
against the model's context, the OpenAI response and SSE chunk shapes, and the SSE stream that
ends in ``data: [DONE]`` or, after a failure, in one final error event. Every SSE event carries an
``id:`` (``<request id>:<n>``, n counting from 1).

A generation survives its worker: ``Call.chunks`` keeps the token ids of every chunk it has
passed on; when the worker fails (``WorkerFailedError``) the request is dispatched again
(``Dispatcher.redispatch``: another ready worker, or the restarted one, within the request's queue
allowance) with those ids as the ``continuation``, at most ``max_attempts`` runs in all, and the
chunks go on with no gap and no repeat. Greedy and seeded sampling continue exactly as the dead
worker would have; a request without a seed is given one here, so that holds for it too. An
engine that sends no token ids (TensorRT-LLM's ensemble) cannot be resumed after its first text.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from fastapi import Request as HttpRequest
from sse_starlette import ServerSentEvent

from gateway.admission import client_gone
from gateway.composition import Gateway
from gateway.context import RequestContext, request_context
from gateway.dispatcher import Ticket
from gateway.errors import (
    ClientClosedError,
    ContextLengthExceededError,
    GatewayError,
    InvalidRequestError,
    UpstreamError,
    WorkerFailedError,
)
from gateway.outcomes import CANCELLED, COMPLETED, Ending
from gateway.request_parameters import check_parameters
from gateway.schemas import ChatCompletionRequest, CompletionRequest, as_list
from gateway.stream_journal import Outgoing, StreamEvents
from gateway.structured_output import response_grammar
from gateway.transport.protocol import GenerationRequest, TextChunk, Transport
from scheduling.prediction.prefix_reuse import PromptPrefixes
from scheduling.tenants import Tenant
from settings.stack import ModelSpec

T = TypeVar("T")


@dataclass
class Progress:
    """What a generation has passed on: the ids of its tokens (what a resume continues after)."""

    token_ids: list[int] = field(default_factory=list)
    resumable: bool = True  # False once a chunk with text came without its token ids
    resumes: int = 0

    def add(self, chunk: TextChunk) -> None:
        self.token_ids.extend(chunk.token_ids)
        if chunk.text and not chunk.token_ids:
            self.resumable = False


async def _no_redispatch(ticket: Ticket) -> None:
    raise WorkerFailedError("the worker failed and this call cannot be sent again")


@dataclass(frozen=True)
class Call:
    """One generation call as the routes see it; ``redispatch`` sends its ticket to another
    worker after a failure (``Dispatcher.redispatch``), at most ``max_attempts`` runs in all."""

    request_id: str
    tenant: Tenant
    model: ModelSpec
    generation: GenerationRequest
    created: int
    ticket: Ticket
    transport: Transport
    redispatch: Callable[[Ticket], Awaitable[None]] = _no_redispatch
    max_attempts: int = 1
    progress: Progress = field(default_factory=Progress)
    on_resume: Callable[[], None] = lambda: None

    async def chunks(self) -> AsyncIterator[TextChunk]:
        """The generation's chunks, resumed on another worker when its worker fails (see the
        module docstring); the first one of each run tells the scheduler the prompt is prefilled
        (``Ticket.first_output`` acts once per dispatch). Closing this iterator cancels the
        generation."""
        progress = self.progress
        while True:
            generation = replace(self.generation, continuation=tuple(progress.token_ids))
            stream = self.transport.generate(self.ticket.worker_id, self.model.name,
                                             self.ticket.request.model_version, self.request_id, generation)
            try:
                async for chunk in stream:
                    self.ticket.first_output()
                    progress.add(chunk)
                    yield chunk
                return
            except WorkerFailedError:
                if not progress.resumable or self.ticket.attempts >= self.max_attempts:
                    raise
            finally:
                await stream.aclose()
            await self.redispatch(self.ticket)
            progress.resumes += 1
            self.on_resume()


def check_unsupported(body: ChatCompletionRequest | CompletionRequest) -> None:
    """Refuse parameters this engine does not honour (``gateway/request_parameters.py``) and the
    values of declared ones it cannot serve."""
    check_parameters(body)
    if body.n != 1:
        raise InvalidRequestError("only n=1 is supported", param="n")
    if body.logprobs:
        raise InvalidRequestError("logprobs are not supported", param="logprobs")


async def prompt_tokens(gateway: Gateway, model: ModelSpec, prompt: str,
                        body: ChatCompletionRequest | CompletionRequest) -> list[int]:
    """The prompt's token ids, tokenised off the event loop; a prompt whose length alone proves it
    cannot fit the context is refused without tokenising it."""
    tokenizer = gateway.models.llm_tokenizers[model.name]
    at_least = tokenizer.min_tokens(prompt)
    if at_least >= model.context_tokens:
        raise ContextLengthExceededError(
            f"this model's maximum context length is {model.context_tokens} tokens; the prompt needs at "
            f"least {at_least}", param=_prompt_param(body))
    return await gateway.models.offload.run(len(prompt), tokenizer.tokens, prompt)


def _prompt_param(body: ChatCompletionRequest | CompletionRequest) -> str:
    return "messages" if isinstance(body, ChatCompletionRequest) else "prompt"


def build_generation(gateway: Gateway, model: ModelSpec, tenant: Tenant, prompt: str, tokens: list[int],
                     body: ChatCompletionRequest | CompletionRequest, max_tokens: int | None) -> GenerationRequest:
    """Fit the request (its prompt tokenised: ``prompt_tokens``) into the model's context."""
    prompt_tokens = len(tokens)
    room = model.context_tokens - prompt_tokens
    if room < 1 or (max_tokens is not None and max_tokens > room):
        asked = prompt_tokens + (max_tokens or 0)
        raise ContextLengthExceededError(
            f"this model's maximum context length is {model.context_tokens} tokens; the request "
            f"needs {asked} ({prompt_tokens} in the prompt"
            + (f", {max_tokens} to generate)" if max_tokens else ")"),
            param=_prompt_param(body),
        )
    stop = tuple(as_list(body.stop)) if body.stop is not None else ()
    seed = body.seed if body.seed is not None else secrets.randbits(31)  # a resume continues it exactly
    defaults = model.sampling.over(gateway.models.llm_tokenizers[model.name].sampling)
    return GenerationRequest(
        prompt=prompt, prompt_tokens=prompt_tokens,
        max_tokens=max_tokens if max_tokens is not None else min(model.default_max_tokens, room),
        temperature=_given(body.temperature, defaults.temperature), top_p=_given(body.top_p, defaults.top_p),
        top_k=_given(body.top_k, defaults.top_k), seed=seed,
        stop=stop, priority=tenant.tier.triton_priority,
        grammar=response_grammar(gateway.models.config, model, getattr(body, "response_format", None)),
        prefixes=PromptPrefixes.of(tokens) if _reuses_prefixes(gateway, model.name) else None,
    )


def _given(value: T | None, default: T | None) -> T | None:
    """The request's value; the model's recommended default where the request leaves it out."""
    return value if value is not None else default


def _reuses_prefixes(gateway: Gateway, model: str) -> bool:
    """Whether the scheduler predicts prefix reuse for ``model`` (else its prompt is not hashed)."""
    limits = gateway.scheduling.limits.get(model)
    return limits is not None and limits.prefix_reuse


def usage(chunk: TextChunk) -> dict[str, int]:
    return {"prompt_tokens": chunk.prompt_tokens, "completion_tokens": chunk.completion_tokens,
            "total_tokens": chunk.prompt_tokens + chunk.completion_tokens}


async def collect(gateway: Gateway, call: Call, context: RequestContext | None = None) -> tuple[str, TextChunk]:
    """Run a call to completion; return the whole text and the final chunk. Ends the call's ticket.
    With ``context``, the first token's time is observed as for a stream (TTFT, access log)."""
    parts: list[str] = []
    last: TextChunk | None = None
    ending: Ending = CANCELLED
    try:
        async for chunk in call.chunks():
            if chunk.text and context is not None and context.ttft_s is None:
                observe_first_token(gateway, call, context)
            parts.append(chunk.text)
            last = chunk
        if last is None or last.finish_reason is None:
            raise UpstreamError(f"model {call.model.name} ended the generation without a finish reason")
        record_tokens(gateway, call, last)
        ending = COMPLETED
        return "".join(parts), last
    except GatewayError as exc:
        ending = exc.ending
        raise
    finally:
        call.ticket.finish(ending, last.completion_tokens if last is not None else 0)


async def collect_unless_gone(http_request: HttpRequest, gateway: Gateway, call: Call) -> tuple[str, TextChunk]:
    """``collect``, cancelled (and the Triton request with it) when the client disconnects."""
    task = asyncio.ensure_future(collect(gateway, call, request_context(http_request)))
    gone = asyncio.ensure_future(client_gone(http_request.receive))
    try:
        racing: set[asyncio.Future[Any]] = {task, gone}
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        raise ClientClosedError("the client closed the connection during generation")
    return task.result()


def record_tokens(gateway: Gateway, call: Call, last: TextChunk) -> None:
    tokens = gateway.metrics.tokens
    tokens.labels(call.tenant.name, call.model.name, "prompt").inc(last.prompt_tokens)
    tokens.labels(call.tenant.name, call.model.name, "completion").inc(last.completion_tokens)


def observe_first_token(gateway: Gateway, call: Call, context: RequestContext) -> None:
    """The call's first output token arrived now: the TTFT histogram and the request's context."""
    ttft_s = gateway.dispatcher.clock() - call.ticket.request.arrival_s
    gateway.metrics.ttft_s.labels(call.model.name, call.tenant.tier.value, call.ticket.dispatch.pool).observe(ttft_s)
    context.ttft_s = ttft_s


def _observe_tpot(gateway: Gateway, call: Call, context: RequestContext, generated: int) -> None:
    """Time per output token of a finished stream: first to last token over the tokens after the first."""
    if context.ttft_s is None or generated < 2:
        return
    since_first_s = gateway.dispatcher.clock() - call.ticket.request.arrival_s - context.ttft_s
    gateway.metrics.tpot_s.labels(call.model.name, call.tenant.tier.value,
                                  call.ticket.dispatch.pool).observe(max(0.0, since_first_s) / (generated - 1))


def chat_chunk(base: dict[str, Any], chunk: TextChunk) -> dict[str, Any]:
    delta = {"content": chunk.text} if chunk.text else {}
    return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": chunk.finish_reason}]}


def completion_chunk(base: dict[str, Any], chunk: TextChunk) -> dict[str, Any]:
    return {**base, "choices": [{"index": 0, "text": chunk.text, "logprobs": None,
                                 "finish_reason": chunk.finish_reason}]}


CHUNK_MAKERS: dict[str, Callable[[dict[str, Any], TextChunk], dict[str, Any]]] = {
    "chat.completion.chunk": chat_chunk, "text_completion": completion_chunk}


def sse_stream(
    gateway: Gateway, call: Call, context: RequestContext, first_chunk: dict[str, Any] | None,
    base: dict[str, Any], include_usage: bool, events: StreamEvents | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """The SSE body of a streamed call: chunks (``CHUNK_MAKERS[base["object"]]``), optional usage,
    ``[DONE]``; or an error event. Every event is numbered by ``events`` and, with its journal, sent
    once recorded (``StreamEvents.sent``). Ends the call's ticket with the outcome and the tokens
    generated."""
    events = events or StreamEvents(call.request_id)
    return events.sent(_stream_events(gateway, call, context, first_chunk, base, include_usage, events))


async def _stream_events(
    gateway: Gateway, call: Call, context: RequestContext, first_chunk: dict[str, Any] | None,
    base: dict[str, Any], include_usage: bool, events: StreamEvents,
) -> AsyncIterator[Outgoing]:
    make_chunk = CHUNK_MAKERS[base["object"]]
    first_token_seen = False
    ending, generated = CANCELLED, 0
    pending_ids: tuple[int, ...] = ()  # ids of chunks that carried no event (no text): go with the next
    try:
        if first_chunk is not None:
            yield events.event(first_chunk)
        async for chunk in call.chunks():
            generated = chunk.completion_tokens
            pending_ids += chunk.token_ids
            if chunk.text and not first_token_seen:
                first_token_seen = True
                observe_first_token(gateway, call, context)
            if chunk.text or chunk.finish_reason is not None:
                yield events.event(make_chunk(base, chunk), pending_ids)
                pending_ids = ()
            if chunk.finish_reason is not None:
                record_tokens(gateway, call, chunk)
                _observe_tpot(gateway, call, context, chunk.completion_tokens)
                if include_usage:
                    yield events.event({**base, "choices": [], "usage": usage(chunk)})
        ending = COMPLETED
        yield events.event("[DONE]", done=True)
    except GatewayError as exc:
        ending = context.ending = exc.ending
        yield events.event(exc.body(), done=True)
    except Exception:  # never cut a stream without telling the client why
        failure = UpstreamError(f"generation on model {call.model.name} failed")
        ending = context.ending = failure.ending
        yield events.event(failure.body(), done=True)
    finally:
        if ending == CANCELLED:
            events.detach()
        call.ticket.finish(ending, generated)
