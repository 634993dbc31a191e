"""Resumable SSE streams: every event numbered, and recorded before it is sent.

``StreamEvents`` gives a stream's n-th event the id ``<request id>:<n>`` (n from 1, or from where a
resumed stream goes on). With a ``Journal`` it first appends the event (its data and the token ids
whose text it carries) to the state store's journal of the stream (``StateStore.append_stream``),
so the journal always holds at least what the client was sent; a client that reconnects with
``Last-Event-ID`` to any gateway sharing the store gets the events after it
(``routes/stream_resume.py``). The journal lives ``retention_s`` after its last event.

Ownership: the gateway producing a stream holds a lease on it (``set_stream_owner``, renewed
while it sends, ``OWNER_LEASE_S``). When its client goes away it marks the stream ``DETACHED``; a
gateway that dies simply stops renewing. A stream that is not done and whose owner is detached or
gone is continued by the gateway the client reconnects to, from the journal's token ids.

When the store fails, the stream goes on and its unrecorded events wait (at most
``MAX_PENDING_EVENTS``): each later event first retries them, so the journal catches up once the
store answers again; a client whose ``Last-Event-ID`` is past what the journal holds is refused
rather than sent a repeat (``routes/stream_resume.py``). One warning per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from sse_starlette import ServerSentEvent

from gateway.state_store.protocol import StateStore, StoreUnavailable, StreamEvent

log = logging.getLogger(__name__)
OWNER_LEASE_S = 3.0
OWNER_RENEW_S = 1.0
DETACHED = "-detached-"
MAX_PENDING_EVENTS = 10_000
_background: set[asyncio.Task[None]] = set()


def event_id(request_id: str, seq: int) -> str:
    return f"{request_id}:{seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``(request id, n)`` of a ``Last-Event-ID`` this gateway issued; None for anything else."""
    request_id, _, seq = value.strip().rpartition(":")
    if not request_id or not seq.isdigit() or len(seq) > 9 or len(request_id) > 128:
        return None
    return request_id, int(seq)


class Journal:
    """The store's record of one stream; see the module docstring."""

    def __init__(self, store: StateStore, request_id: str, tenant: str, context: bytes, gateway_id: str,
                 retention_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self.request_id = request_id
        self._tenant = tenant
        self._context = context
        self._gateway_id = gateway_id
        self._retention_s = retention_s
        self._clock = clock
        self._opened = False
        self._failed = False
        self._warned = False
        self._pending: list[StreamEvent] = []  # sent but not yet recorded (the store failed)
        self._renewed_s = float("-inf")

    async def record(self, event: StreamEvent, done: bool) -> None:
        if self._failed:
            return
        self._pending.append(event)
        try:
            if not self._opened:
                await self._store.open_stream(self.request_id, self._tenant, self._context, self._retention_s)
                self._opened = True
            await self._store.append_stream(self.request_id, self._pending, done, self._retention_s)
            self._pending = []
            now = self._clock()
            if not done and now - self._renewed_s >= OWNER_RENEW_S:
                self._renewed_s = now
                await self._store.set_stream_owner(self.request_id, self._gateway_id, OWNER_LEASE_S)
        except StoreUnavailable as exc:
            if not self._warned:
                self._warned = True
                log.warning("stream %s: the state store did not record its events (%s); retrying with the next",
                            self.request_id, exc)
            if len(self._pending) > MAX_PENDING_EVENTS:
                self._failed, self._pending = True, []

    def detach(self) -> None:
        """The client went away before the end: any gateway may continue the stream now."""
        if self._failed or not self._opened:
            return

        async def mark() -> None:
            with contextlib.suppress(StoreUnavailable):
                await self._store.set_stream_owner(self.request_id, DETACHED, self._retention_s)

        task = asyncio.ensure_future(mark())
        _background.add(task)
        task.add_done_callback(_background.discard)


class StreamEvents:
    """Numbers (and, with a journal, records) the events of one stream."""

    def __init__(self, request_id: str, journal: Journal | None = None, first_seq: int = 1) -> None:
        self.request_id = request_id
        self.journal = journal
        self.count = first_seq - 1

    async def event(self, data: dict[str, Any] | str, token_ids: tuple[int, ...] = (),
                    done: bool = False) -> ServerSentEvent:
        self.count += 1
        payload = data if isinstance(data, str) else orjson.dumps(data).decode()
        if self.journal is not None:
            await self.journal.record(StreamEvent(self.count, payload, token_ids), done)
        return ServerSentEvent(data=payload, id=event_id(self.request_id, self.count))

    def detach(self) -> None:
        if self.journal is not None:
            self.journal.detach()
