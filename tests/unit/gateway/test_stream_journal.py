"""The stream journal: events numbered and sent once recorded, recorded in batches while an append
is in flight; a failed append sends the rest without ids and marks the stream unresumable."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from gateway.state_store.embedded import EmbeddedStateStore
from gateway.state_store.protocol import StoreUnavailable, StreamEvent
from gateway.stream_journal import ABANDONED, Journal, Outgoing, StreamEvents, parse_event_id


class FlakyStore(EmbeddedStateStore):
    """The embedded store, whose writes fail while ``down`` and whose appends take ``delay_s``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.delay_s = 0.0
        self.appends: list[int] = []  # events per append

    async def append_stream(self, request_id: str, events: Sequence[StreamEvent], done: bool,
                            ttl_s: float) -> None:
        if self.down:
            raise StoreUnavailable("down")
        await asyncio.sleep(self.delay_s)
        self.appends.append(len(events))
        await super().append_stream(request_id, events, done, ttl_s)

    async def set_stream_owner(self, request_id: str, gateway: str, ttl_s: float) -> None:
        if self.down:
            raise StoreUnavailable("down")
        await super().set_stream_owner(request_id, gateway, ttl_s)


async def _send(events: StreamEvents, *outgoing: Outgoing) -> list[tuple[str | None, str]]:
    async def source() -> AsyncIterator[Outgoing]:
        for item in outgoing:
            yield item

    return [(e.id, str(e.data)) async for e in events.sent(source())]


async def test_events_are_numbered_and_sent_once_recorded() -> None:
    store = FlakyStore()
    events = StreamEvents("req_a", Journal(store, "req_a", "acme", b"{}", "gw-1", 60.0))
    assert await _send(events, events.event({"n": 1}, (7,)), events.event("two", (8,))) == [
        ("req_a:1", '{"n":1}'), ("req_a:2", "two")]
    journal = await store.read_stream("req_a", 0)
    assert journal is not None and journal.length == 2 and journal.token_ids == (7, 8)
    assert await store.stream_owner("req_a") == "gw-1"


async def test_events_produced_during_a_slow_append_go_together_in_the_next() -> None:
    store = FlakyStore()
    store.delay_s = 0.05
    events = StreamEvents("req_b", Journal(store, "req_b", "acme", b"{}", "gw-1", 60.0))

    async def source() -> AsyncIterator[Outgoing]:
        for n in range(20):
            yield events.event(f"e{n}", (n,), done=n == 19)
            await asyncio.sleep(0.01)

    sent = [e.id async for e in events.sent(source())]
    assert sent == [f"req_b:{n}" for n in range(1, 21)]
    assert len(store.appends) < 10  # ~4 batches, not 20 round trips
    journal = await store.read_stream("req_b", 0)
    assert journal is not None and journal.done and journal.length == 20


async def test_a_failed_append_sends_the_rest_without_ids_and_marks_the_stream_abandoned() -> None:
    store = FlakyStore()
    events = StreamEvents("req_c", Journal(store, "req_c", "acme", b"{}", "gw-1", 60.0))
    assert await _send(events, events.event("one")) == [("req_c:1", "one")]
    store.down = True
    assert await _send(events, events.event("two"), events.event("[DONE]", done=True)) == [
        (None, "two"), (None, "[DONE]")]
    store.down = False
    for _ in range(100):  # the mark is retried in the background
        if await store.stream_owner("req_c") == ABANDONED:
            break
        await asyncio.sleep(0.01)
    assert await store.stream_owner("req_c") == ABANDONED
    journal = await store.read_stream("req_c", 0)
    assert journal is not None and journal.length == 1 and not journal.done


async def test_closing_the_sent_stream_cancels_its_source() -> None:
    events = StreamEvents("req_d", Journal(FlakyStore(), "req_d", "acme", b"{}", "gw-1", 60.0))
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[Outgoing]:
        try:
            while True:
                yield events.event("tick")
                await asyncio.sleep(0.001)
        finally:
            closed.set()

    sent = events.sent(endless())
    assert (await anext(sent)).id == "req_d:1"
    await sent.aclose()
    assert closed.is_set()


def test_only_ids_this_api_issues_parse() -> None:
    assert parse_event_id("req_abc:12") == ("req_abc", 12)
    assert parse_event_id("req_abc") is None
    assert parse_event_id("req_abc:-1") is None
    assert parse_event_id(":3") is None
