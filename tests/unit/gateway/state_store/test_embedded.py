"""What only the embedded store has: its memory caps."""

from __future__ import annotations

import pytest

from gateway.state_store import embedded
from gateway.state_store.embedded import EmbeddedStateStore
from gateway.state_store.protocol import ClaimState, RequestRecord


async def test_entries_past_the_cap_drop_the_least_recently_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "MAX_ENTRIES", 3)
    store = EmbeddedStateStore()
    await store.put_status([RequestRecord(f"r{i}", "acme", "chat", "standard", i) for i in range(4)], 60)
    assert await store.get_status("r0") is None
    assert [r.request_id for r in await store.recent_statuses("acme", None, 10)] == ["r3", "r2", "r1"]
    for i in range(4):
        await store.claim("acme", f"key-{i}", "fp", f"r{i}", 60)
    assert (await store.claim("acme", "key-0", "fp", "late", 60)).state is ClaimState.OWNER
