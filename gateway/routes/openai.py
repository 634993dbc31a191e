"""OpenAI-compatible routes: chat completions, completions, embeddings and the model list."""

from __future__ import annotations

import base64
import time
from typing import Annotated, Any

import jinja2
import numpy as np
from fastapi import APIRouter, Depends, Request

from gateway.auth import authenticate
from gateway.batched import check_inputs, check_request_tokens, run_batched, text_counts, text_rows
from gateway.composition import Gateway, gateway_of
from gateway.context import request_context
from gateway.errors import ContextLengthExceededError, InvalidRequestError
from gateway.openapi import INFERENCE, READ, errors, streamed_or_json
from gateway.responses import JSONResponse
from gateway.routes.generation import (
    Call,
    build_generation,
    check_unsupported,
    collect_unless_gone,
    prompt_tokens,
    sse_stream,
    usage,
)
from gateway.routes.stream_resume import LAST_EVENT_ID, event_stream, journaled_events, resume_stream
from gateway.routing import version_for
from gateway.schemas import ChatCompletionRequest, ChatMessage, CompletionRequest, EmbeddingRequest, as_list
from scheduling.tenants import Tenant
from settings.stack import ModelSpec, WorkloadKind

router = APIRouter(prefix="/v1")
TenantDep = Annotated[Tenant, Depends(authenticate)]


def _message_text(message: ChatMessage, index: int) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    texts = []
    for part in message.content:
        if part.type != "text" or part.text is None:
            raise InvalidRequestError(f"content part type '{part.type}' is not supported by this model",
                                      param=f"messages.{index}.content")
        texts.append(part.text)
    return "".join(texts)


def _llm(request: Request, tenant: Tenant, name: str) -> ModelSpec:
    request_context(request).model = name
    return gateway_of(request).models.model_for(name, {WorkloadKind.LLM}, tenant)


async def _start_call(request: Request, tenant: Tenant, model: ModelSpec,
                      body: ChatCompletionRequest | CompletionRequest, prompt: str, max_tokens: int | None) -> Call:
    """Validate, admit and wait for a worker before anything is streamed, so that a rejection or
    an expired deadline is an HTTP status, not an event in a stream."""
    gateway = gateway_of(request)
    check_unsupported(body)
    tokens = await prompt_tokens(gateway, model, prompt, body)
    generation = build_generation(gateway, model, tenant, prompt, tokens, body, max_tokens)
    ticket = await gateway.admission.admit(request, tenant, model, generation.prompt_tokens, generation.max_tokens,
                                           prefixes=generation.prefixes)
    return Call(request_context(request).request_id, tenant, model, generation, int(time.time()), ticket,
                gateway.transport, redispatch=gateway.dispatcher.redispatch,
                max_attempts=gateway.admission.max_attempts,
                on_resume=gateway.metrics.stream_resumes.labels("worker").inc)




@router.post("/chat/completions", responses={**streamed_or_json(), **errors(*INFERENCE)})
async def chat_completions(body: ChatCompletionRequest, request: Request, tenant: TenantDep) -> Any:
    gateway = gateway_of(request)
    if body.stream and LAST_EVENT_ID in request.headers:
        return await resume_stream(request, tenant, request.headers[LAST_EVENT_ID])
    model = _llm(request, tenant, body.model)
    messages = [{"role": "system" if m.role == "developer" else m.role, "content": _message_text(m, i)}
                for i, m in enumerate(body.messages)]
    size_chars = sum(len(m["content"]) for m in messages)
    try:
        prompt = await gateway.models.offload.run(
            size_chars, gateway.models.llm_tokenizers[model.name].apply_chat_template, messages)
    except jinja2.TemplateError as exc:  # the model's own template rejects this conversation
        raise InvalidRequestError(f"the model's chat template rejects these messages: {exc}",
                                  param="messages") from exc
    call = await _start_call(request, tenant, model, body, prompt, body.max_completion_tokens or body.max_tokens)
    chunk_id = "chatcmpl-" + call.request_id.removeprefix("req_")
    base = {"id": chunk_id, "object": "chat.completion.chunk", "created": call.created, "model": body.model}
    if body.stream:
        first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "logprobs": None, "finish_reason": None}]}
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = journaled_events(request, tenant, call, base, include_usage)
        stream = sse_stream(gateway, call, request_context(request), first, base, include_usage, events)
        return event_stream(stream, call)
    text, last = await collect_unless_gone(request, gateway, call)
    return JSONResponse({
        "id": chunk_id, "object": "chat.completion", "created": call.created, "model": body.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": None, "finish_reason": last.finish_reason}],
        "usage": usage(last),
    })


@router.post("/completions", responses={**streamed_or_json(), **errors(*INFERENCE)})
async def completions(body: CompletionRequest, request: Request, tenant: TenantDep) -> Any:
    if body.stream and LAST_EVENT_ID in request.headers:
        return await resume_stream(request, tenant, request.headers[LAST_EVENT_ID])
    if body.echo:
        raise InvalidRequestError("echo is not supported", param="echo")
    if body.suffix:
        raise InvalidRequestError("suffix is not supported", param="suffix")
    prompt = as_list(body.prompt)[0]
    call = await _start_call(request, tenant, _llm(request, tenant, body.model), body, prompt, body.max_tokens)
    completion_id = "cmpl-" + call.request_id.removeprefix("req_")
    base = {"id": completion_id, "object": "text_completion", "created": call.created, "model": body.model}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = journaled_events(request, tenant, call, base, include_usage)
        stream = sse_stream(gateway_of(request), call, request_context(request), None, base, include_usage, events)
        return event_stream(stream, call)
    text, last = await collect_unless_gone(request, gateway_of(request), call)
    return JSONResponse({
        **base,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": last.finish_reason}],
        "usage": usage(last),
    })


@router.post("/embeddings", responses=errors(*INFERENCE))
async def embeddings(body: EmbeddingRequest, request: Request, tenant: TenantDep) -> Any:
    gateway = gateway_of(request)
    request_context(request).model = body.model
    model = gateway.models.model_for(body.model, {WorkloadKind.EMBEDDING}, tenant)
    texts = as_list(body.input)
    if any(not t for t in texts):
        raise InvalidRequestError("inputs must be non-empty strings", param="input")
    check_inputs(gateway.settings, len(texts), "input")
    counts = await text_counts(gateway.models, model, texts)
    too_long = [i for i, n in enumerate(counts) if n > model.context_tokens]
    if too_long:
        raise ContextLengthExceededError(
            f"input {too_long[0]} has {counts[too_long[0]]} tokens; this model takes at most "
            f"{model.context_tokens}", param="input")
    check_request_tokens(gateway.settings, sum(counts), "input")
    vectors = await _embed(gateway, request, tenant, model, texts, counts)
    if body.dimensions is not None and body.dimensions != vectors.shape[1]:
        raise InvalidRequestError(f"this model has {vectors.shape[1]} dimensions", param="dimensions")
    data = [{"object": "embedding", "index": i, "embedding": _encode_vector(v, body.encoding_format)}
            for i, v in enumerate(vectors)]
    total = sum(counts)
    gateway.metrics.tokens.labels(tenant.name, model.name, "prompt").inc(total)
    return JSONResponse({"object": "list", "data": data, "model": body.model,
                           "usage": {"prompt_tokens": total, "total_tokens": total}})


async def _embed(gateway: Gateway, request: Request, tenant: Tenant, model: ModelSpec,
                 texts: list[str], counts: list[int]) -> np.ndarray:
    """Vectors for ``texts``: the tenant's cached rows, the rest computed (and then cached)."""
    cache = gateway.models.cache_for(model)
    version = version_for(gateway.routing, request_context(request), tenant, model.name)
    found = cache.lookup(tenant.name, model.name, version, texts) if cache else [None] * len(texts)
    missing = [i for i, row in enumerate(found) if row is None]
    if cache is not None:
        gateway.metrics.cache_rows.labels(model.name, "hit").inc(len(texts) - len(missing))
        gateway.metrics.cache_rows.labels(model.name, "miss").inc(len(missing))
        request_context(request).cache = "miss" if len(missing) == len(texts) else "partial" if missing else "hit"
    if missing:
        todo = [texts[i] for i in missing]
        result = await run_batched(gateway.admission, gateway.transport, request, tenant, model,
                                   {"text": text_rows(todo)}, ["embedding"],
                                   prefill_tokens=sum(counts[i] for i in missing))
        computed = result["embedding"]
        if cache is not None:
            cache.store(tenant.name, model.name, version, todo, computed)
        for i, row in zip(missing, computed, strict=True):
            found[i] = row
    return np.stack([row for row in found if row is not None])


def _encode_vector(vector: np.ndarray, encoding_format: str) -> Any:
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return vector.tolist()


@router.get("/models", responses=errors(*READ))
async def list_models(request: Request, tenant: TenantDep) -> Any:
    gateway = gateway_of(request)
    models = [m for m in gateway.models.served_models() if tenant.may_use_model(m.name)]
    return JSONResponse({"object": "list", "data": [
        {"id": m.name, "object": "model", "created": 0, "owned_by": "shunter",
         "kind": m.kind.value, "versions": sorted(gateway.routing.live_versions().get(m.name, {m.version}))}
        for m in models
    ]})
