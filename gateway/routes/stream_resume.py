"""``Last-Event-ID``: a client that lost its stream reconnects and gets the rest of it.

A streamed chat or completion is journaled as it is sent (``gateway.stream_journal``), with what
it takes to continue it (``journal_context``). The client sends the same request again with the
header ``Last-Event-ID: <request id>:<n>`` (the SSE standard's reconnect) to any gateway sharing
the state store, within ``stream_retention_s`` of the stream's last event: it gets the events after
``n`` with their ids, then

- nothing more when the stream had ended (``[DONE]`` or its error event);
- what the producing gateway still sends, while that gateway holds the stream (its client left
  only just now, or another client follows it);
- once the stream is detached (its client went away) or its gateway died (its lease lapsed): the
  generation continued here, as a new scheduled request, from the journal's token ids
  (``GenerationRequest.continuation``), numbered on from the last event. Greedy and seeded
  generations (every generation gets a seed) go on exactly as the first would have.

Another tenant's stream, one whose journal expired, or one whose recording failed (the journal
gave up: ``ABANDONED``) is 404 ``stream_not_found``. Two clients
that reconnect to a detached stream at the same moment may both continue it (the ownership lease
is not a lock); each gets a whole stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from gateway.composition import Gateway, gateway_of
from gateway.context import request_context
from gateway.errors import GatewayError, InvalidRequestError, NotFoundError, UnavailableError
from gateway.outcomes import CANCELLED
from gateway.routes.generation import Call, Progress, sse_stream
from gateway.state_store.protocol import StoreUnavailable, StreamJournal
from gateway.stream_journal import ABANDONED, DETACHED, Journal, Outgoing, StreamEvents, event_id, parse_event_id
from gateway.transport.protocol import GenerationRequest
from scheduling.tenants import Tenant
from settings.stack import WorkloadKind

LAST_EVENT_ID = "last-event-id"
SSE_PING_S = 15
FOLLOW_POLL_S = 0.05


def event_stream(stream: AsyncIterator[ServerSentEvent], call: Call | None = None) -> EventSourceResponse:
    """The SSE response; its background task ends the call's ticket if the stream never started."""
    background = BackgroundTask(call.ticket.finish, CANCELLED) if call is not None else None
    return EventSourceResponse(stream, ping=SSE_PING_S, sep="\n", background=background)


def journal_context(call: Call, base: dict[str, Any], include_usage: bool) -> bytes:
    """What a gateway needs to continue this stream: the chunk shape and the generation."""
    g = call.generation
    return orjson.dumps({
        "model": call.model.name, "base": base, "include_usage": include_usage,
        "generation": {"prompt": g.prompt, "prompt_tokens": g.prompt_tokens, "max_tokens": g.max_tokens,
                       "temperature": g.temperature, "top_p": g.top_p, "top_k": g.top_k, "seed": g.seed,
                       "stop": list(g.stop)},
    })


def journaled_events(request: Request, tenant: Tenant, call: Call, base: dict[str, Any],
                     include_usage: bool) -> StreamEvents:
    gateway = gateway_of(request)
    journal = Journal(gateway.store, call.request_id, tenant.name, journal_context(call, base, include_usage),
                      gateway.gateway_id, gateway.settings.stream_retention_s)
    return StreamEvents(call.request_id, journal)


async def resume_stream(request: Request, tenant: Tenant, header: str) -> EventSourceResponse:
    """The rest of the stream ``header`` names; see the module docstring."""
    gateway = gateway_of(request)
    parsed = parse_event_id(header)
    if parsed is None:
        raise InvalidRequestError("Last-Event-ID must be the id of an event this API sent (<request id>:<n>)",
                                  param="Last-Event-ID")
    request_id, after = parsed
    journal = await _read(gateway, request_id, after)
    if journal is None or journal.tenant != tenant.name:
        raise NotFoundError(f"no stream {request_id} to resume (streams stay resumable for "
                            f"{gateway.settings.stream_retention_s:.0f} s after their last event)",
                            code="stream_not_found")
    if after > journal.length or await _owner(gateway, request_id) == ABANDONED:  # its recording failed
        raise NotFoundError(f"stream {request_id} was recorded up to event {journal.length} only (the state "
                            f"store failed while it was sent): it cannot be resumed", code="stream_not_found")
    request_context(request).model = orjson.loads(journal.context)["model"]
    gateway.metrics.stream_resumes.labels("client").inc()
    return event_stream(_follow(request, gateway, tenant, request_id, journal))


async def _only(outgoing: Outgoing) -> AsyncIterator[Outgoing]:
    yield outgoing


async def _read(gateway: Gateway, request_id: str, after: int) -> StreamJournal | None:
    try:
        return await gateway.store.read_stream(request_id, after)
    except StoreUnavailable as exc:
        raise _store_down() from exc


async def _owner(gateway: Gateway, request_id: str) -> str | None:
    try:
        return await gateway.store.stream_owner(request_id)
    except StoreUnavailable as exc:
        raise _store_down() from exc


def _store_down() -> UnavailableError:
    return UnavailableError("streams cannot be resumed while the state store is unavailable",
                            code="state_store_unavailable", retry_after_s=1)


async def _follow(request: Request, gateway: Gateway, tenant: Tenant, request_id: str,
                  journal: StreamJournal) -> AsyncIterator[ServerSentEvent]:
    """Replay, then follow the producing gateway, then continue here once nobody produces it."""
    give_up_s = time.monotonic() + gateway.settings.stream_retention_s
    try:
        while True:
            after = journal.length
            for event in journal.events:
                yield ServerSentEvent(data=event.data, id=event_id(request_id, event.seq))
            if journal.done:
                return
            owner = await gateway.store.stream_owner(request_id)
            if owner == ABANDONED:
                raise NotFoundError(f"stream {request_id} stopped being recorded", code="stream_not_found")
            if owner is None or owner == DETACHED:
                async for continued in _continue(request, gateway, tenant, request_id, journal):
                    yield continued
                return
            if time.monotonic() > give_up_s:
                raise UnavailableError("the stream's gateway stopped sending it", retry_after_s=1)
            await asyncio.sleep(FOLLOW_POLL_S)
            followed = await gateway.store.read_stream(request_id, after)
            if followed is None:
                raise NotFoundError(f"stream {request_id} expired", code="stream_not_found")
            journal = followed
    except StoreUnavailable:
        failure = UnavailableError("the state store became unavailable while following the stream",
                                   code="state_store_unavailable", retry_after_s=1)
        yield ServerSentEvent(data=orjson.dumps(failure.body()).decode())
    except GatewayError as exc:
        yield ServerSentEvent(data=orjson.dumps(exc.body()).decode())


async def _continue(request: Request, gateway: Gateway, tenant: Tenant, request_id: str,
                    journal: StreamJournal) -> AsyncIterator[ServerSentEvent]:
    """Generate the rest here, as a new scheduled request, numbered and journaled on."""
    context = orjson.loads(journal.context)
    events = StreamEvents(request_id, Journal(gateway.store, request_id, tenant.name, journal.context,
                                              gateway.gateway_id, gateway.settings.stream_retention_s),
                          first_seq=journal.length + 1)
    g = context["generation"]
    generation = GenerationRequest(
        prompt=g["prompt"], prompt_tokens=g["prompt_tokens"], max_tokens=g["max_tokens"],
        temperature=g["temperature"], top_p=g["top_p"], top_k=g["top_k"], seed=g["seed"], stop=tuple(g["stop"]),
        priority=tenant.tier.triton_priority)
    try:
        model = gateway.models.model_for(context["model"], {WorkloadKind.LLM}, tenant)
        ticket = await gateway.admission.admit(request, tenant, model, generation.prompt_tokens,
                                               generation.max_tokens)
    except GatewayError as exc:
        async for refusal in events.sent(_only(events.event(exc.body(), done=True))):
            yield refusal
        return
    call = Call(request_context(request).request_id, tenant, model, generation, context["base"]["created"], ticket,
                gateway.transport, redispatch=gateway.dispatcher.redispatch,
                max_attempts=gateway.admission.max_attempts, progress=Progress(list(journal.token_ids)),
                on_resume=gateway.metrics.stream_resumes.labels("worker").inc)
    async for event in sse_stream(gateway, call, request_context(request), None, context["base"],
                                  context["include_usage"], events):
        yield event
