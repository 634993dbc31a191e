"""Resumable SSE streams: every event numbered, and sent only once the journal holds it.

``StreamEvents`` gives a stream's n-th event the id ``<request id>:<n>`` (n from 1, or from where a
resumed stream goes on). With a ``Journal``, ``StreamEvents.sent`` sends an event only after the
state store acknowledged its append to the stream's journal (its data and the token ids whose text
it carries, ``StateStore.append_stream``), so every id a client holds is in the journal; a client
that reconnects with ``Last-Event-ID`` to any gateway sharing the store gets the events after it
(``routes/stream_resume.py``). The journal lives ``retention_s`` after its last event.

Group commit: the events produced while an append is in flight are appended together, in one
round trip, by the next one; a stream costs one store round trip per batch, not per token, and a
slow store slows the delivery of tokens but not their production.

Ownership: the gateway producing a stream holds a lease on it (``set_stream_owner``, renewed
while it sends, ``OWNER_LEASE_S``). When its client goes away it marks the stream ``DETACHED``; a
gateway that dies simply stops renewing. A stream that is not done and whose owner is detached or
gone is continued by the gateway the client reconnects to, from the journal's token ids.

When an append fails (the store's journal bound, ``RedisStateStore``'s ``journal_timeout_s``,
passed), the journal gives up: the stream goes on, its later events are sent without ``id:`` (an
SSE client then keeps the last recorded id), and the stream is marked ``ABANDONED`` in the
background (retried every ``ABANDON_RETRY_S`` while the store is down, for ``retention_s`` at
most), so that a reconnect is refused rather than sent a repeat or a second continuation. A
reconnect in the moment between the store's return and that mark may still be continued. One
warning per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sse_starlette import ServerSentEvent

from gateway.state_store.protocol import StateStore, StoreUnavailable, StreamEvent

log = logging.getLogger(__name__)
OWNER_LEASE_S = 3.0
OWNER_RENEW_S = 1.0
DETACHED = "-detached-"
ABANDONED = "-abandoned-"
ABANDON_RETRY_S = 0.25
_background: set[asyncio.Task[None]] = set()


def event_id(request_id: str, seq: int) -> str:
    return f"{request_id}:{seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``(request id, n)`` of a ``Last-Event-ID`` this gateway issued; None for anything else."""
    request_id, _, seq = value.strip().rpartition(":")
    if not request_id or not seq.isdigit() or len(seq) > 9 or len(request_id) > 128:
        return None
    return request_id, int(seq)


def _in_background(work: Callable[[], Any]) -> None:
    task = asyncio.ensure_future(work())
    _background.add(task)
    task.add_done_callback(_background.discard)


@dataclass(frozen=True)
class Outgoing:
    """A numbered event on its way to the client; ``done``: the stream's last."""

    event: StreamEvent
    done: bool = False

    def sse(self, request_id: str, numbered: bool = True) -> ServerSentEvent:
        if not numbered:
            return ServerSentEvent(data=self.event.data)
        return ServerSentEvent(data=self.event.data, id=event_id(request_id, self.event.seq))


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
        self.failed = False
        self._renewed_s = float("-inf")

    async def record(self, events: Sequence[StreamEvent], done: bool) -> bool:
        """Append ``events`` (one round trip); True once the store holds them (their ids may be
        sent), False when the journal has given up (now or earlier)."""
        if self.failed:
            return False
        try:
            if not self._opened:
                await self._store.open_stream(self.request_id, self._tenant, self._context, self._retention_s)
                self._opened = True
            await self._store.append_stream(self.request_id, events, done, self._retention_s)
        except StoreUnavailable as exc:
            self._give_up(exc)
            return False
        now = self._clock()
        if not done and now - self._renewed_s >= OWNER_RENEW_S:
            self._renewed_s = now
            with contextlib.suppress(StoreUnavailable):  # a lapsed lease: a reconnect may continue it too
                await self._store.set_stream_owner(self.request_id, self._gateway_id, OWNER_LEASE_S)
        return True

    def _give_up(self, exc: StoreUnavailable) -> None:
        self.failed = True
        log.warning("stream %s: the state store did not record its events (%s); it goes on without "
                    "event ids and cannot be resumed", self.request_id, exc)
        give_up_s = self._clock() + self._retention_s

        async def mark() -> None:
            while self._clock() < give_up_s:
                with contextlib.suppress(StoreUnavailable):
                    await self._store.set_stream_owner(self.request_id, ABANDONED, self._retention_s)
                    return
                await asyncio.sleep(ABANDON_RETRY_S)

        _in_background(mark)

    def detach(self) -> None:
        """The client went away before the end: any gateway may continue the stream now."""
        if self.failed or not self._opened:
            return

        async def mark() -> None:
            with contextlib.suppress(StoreUnavailable):
                await self._store.set_stream_owner(self.request_id, DETACHED, self._retention_s)

        _in_background(mark)


class StreamEvents:
    """Numbers the events of one stream and, with a journal, sends each once it is recorded."""

    def __init__(self, request_id: str, journal: Journal | None = None, first_seq: int = 1) -> None:
        self.request_id = request_id
        self.journal = journal
        self.count = first_seq - 1

    def event(self, data: dict[str, Any] | str, token_ids: tuple[int, ...] = (), done: bool = False) -> Outgoing:
        """The stream's next event, numbered; ``sent`` records and sends it."""
        self.count += 1
        payload = data if isinstance(data, str) else orjson.dumps(data).decode()
        return Outgoing(StreamEvent(self.count, payload, token_ids), done)

    async def sent(self, source: AsyncIterator[Outgoing]) -> AsyncGenerator[ServerSentEvent, None]:
        """``source``'s events as SSE, each after the journal acknowledged it (group commit: see
        the module docstring). Closing this iterator cancels ``source``."""
        journal = self.journal
        if journal is None:
            async for outgoing in source:
                yield outgoing.sse(self.request_id)
            return
        ready: asyncio.Queue[Outgoing | None] = asyncio.Queue()  # None: source ended
        producer = asyncio.ensure_future(_pump(source, ready))
        try:
            while True:
                batch = [await ready.get()]
                while not ready.empty():
                    batch.append(ready.get_nowait())
                to_send = [item for item in batch if item is not None]
                if to_send:
                    recorded = await journal.record([o.event for o in to_send], any(o.done for o in to_send))
                    for item in to_send:
                        yield item.sse(self.request_id, numbered=recorded)
                if batch[-1] is None:
                    await producer  # done: raises the source's own failure, if any
                    return
        finally:
            if not producer.done():
                producer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await producer

    def detach(self) -> None:
        if self.journal is not None:
            self.journal.detach()


async def _pump(source: AsyncIterator[Outgoing], ready: asyncio.Queue[Outgoing | None]) -> None:
    """Move ``source``'s events into ``ready`` as they come (the generation bounds how many)."""
    try:
        async for outgoing in source:
            ready.put_nowait(outgoing)
    finally:
        ready.put_nowait(None)
