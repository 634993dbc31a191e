"""The stream journal: events numbered and recorded before they are sent; a store that fails for
a while delays the record, and the next event catches it up."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.state_store.embedded import EmbeddedStateStore
from gateway.state_store.protocol import StoreUnavailable, StreamEvent
from gateway.stream_journal import Journal, StreamEvents, parse_event_id


class FlakyStore(EmbeddedStateStore):
    """The embedded store, whose appends fail while ``down``."""

    down = False

    async def append_stream(self, request_id: str, events: Sequence[StreamEvent], done: bool,
                            ttl_s: float) -> None:
        if self.down:
            raise StoreUnavailable("down")
        await super().append_stream(request_id, events, done, ttl_s)


async def test_events_are_numbered_recorded_and_caught_up_after_the_store_failed() -> None:
    store = FlakyStore()
    events = StreamEvents("req_a", Journal(store, "req_a", "acme", b"{}", "gw-1", 60.0))
    first = await events.event({"n": 1}, (7,))
    assert (first.id, first.data) == ("req_a:1", '{"n":1}')
    store.down = True
    await events.event("two", (8,))
    journal = await store.read_stream("req_a", 0)
    assert journal is not None and journal.length == 1  # not recorded while the store is down
    store.down = False
    await events.event("[DONE]", done=True)
    journal = await store.read_stream("req_a", 0)
    assert journal is not None and journal.done
    assert [(e.seq, e.data) for e in journal.events] == [(1, '{"n":1}'), (2, "two"), (3, "[DONE]")]
    assert journal.token_ids == (7, 8)
    assert await store.stream_owner("req_a") == "gw-1"


def test_only_ids_this_api_issues_parse() -> None:
    assert parse_event_id("req_abc:12") == ("req_abc", 12)
    assert parse_event_id("req_abc") is None
    assert parse_event_id("req_abc:-1") is None
    assert parse_event_id(":3") is None
