"""The ``StateStore`` contract, checked on every backend (``backend`` in conftest.py)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.state_store.protocol import (
    ClaimState,
    QuotaRefusal,
    QuotaRelease,
    RequestRecord,
    StoredResponse,
    StreamEvent,
)
from scheduling.tenants import Quotas
from tests.unit.gateway.state_store.backends import Backend

NOW = 1_700_000_000.0
LEASE_S = 60.0
TTL_S = 60.0


def record(request_id: str, tenant: str = "acme", created: int = 100, status: str = "queued") -> RequestRecord:
    return RequestRecord(request_id, tenant, "chat", "standard", created, status=status)


# request status


async def test_status_round_trip_returns_what_was_written(backend: Backend) -> None:
    written = RequestRecord("r1", "acme", "chat", "premium", 100, status="running", pool="chat-a", worker="w1",
                            queue_wait_s=0.125, gateway="gw-1")
    await backend.store.put_status([written], TTL_S)
    assert await backend.store.get_status("r1") == written
    assert await backend.store.get_status("absent") is None


async def test_a_written_status_does_not_follow_later_changes_of_the_callers_object(backend: Backend) -> None:
    written = record("r1")
    await backend.store.put_status([written], TTL_S)
    written.status = "running"
    stored = await backend.store.get_status("r1")
    assert stored is not None and stored.status == "queued"


async def test_put_status_replaces_the_record(backend: Backend) -> None:
    await backend.store.put_status([record("r1")], TTL_S)
    await backend.store.put_status([record("r1", status="completed")], TTL_S)
    listed = await backend.store.recent_statuses("acme", None, 10)
    assert [(r.request_id, r.status) for r in listed] == [("r1", "completed")]


async def test_recent_statuses_are_the_tenants_newest_first_filtered_and_limited(backend: Backend) -> None:
    await backend.store.put_status([
        record("old", created=100, status="completed"), record("new", created=300),
        record("mid", created=200), record("other-tenant", tenant="globex", created=400),
    ], TTL_S)
    store = backend.store
    assert [r.request_id for r in await store.recent_statuses("acme", None, 10)] == ["new", "mid", "old"]
    assert [r.request_id for r in await store.recent_statuses("acme", None, 2)] == ["new", "mid"]
    assert [r.request_id for r in await store.recent_statuses("acme", "queued", 10)] == ["new", "mid"]
    assert [r.request_id for r in await store.recent_statuses("acme", "completed", 10)] == ["old"]
    assert await store.recent_statuses("acme", "failed", 10) == []
    assert [r.request_id for r in await store.recent_statuses("globex", None, 10)] == ["other-tenant"]
    assert await store.recent_statuses("initech", None, 10) == []


async def test_a_tenants_listing_looks_through_its_newest_thousand_records_only(backend: Backend) -> None:
    await backend.store.put_status([record("oldest", created=1, status="completed")], TTL_S)
    await backend.store.put_status([record(f"r{i}", created=10 + i) for i in range(2_001)], TTL_S)
    assert await backend.store.recent_statuses("acme", "completed", 10) == []
    assert await backend.store.get_status("oldest") is not None  # still readable by its id


async def test_statuses_expire_after_their_ttl(backend: Backend) -> None:
    await backend.store.put_status([record("r1")], 1.0)
    assert await backend.store.get_status("r1") is not None
    await backend.advance(1.2)
    assert await backend.store.get_status("r1") is None
    assert await backend.store.recent_statuses("acme", None, 10) == []


# idempotency


REPLAYED = StoredResponse(200, b'{"ok": true}\x00\xff\xfe\n', "application/json",
                          (("x-shunter-pool", "chat-a"), ("x-queue-wait-ms", "12")), "r1")


async def test_first_claim_owns_the_key_and_a_repeat_sees_it_in_progress(backend: Backend) -> None:
    store = backend.store
    first = await store.claim("acme", "key-1", "fp", "r1", TTL_S)
    assert (first.state, first.request_id) == (ClaimState.OWNER, "r1")
    repeat = await store.claim("acme", "key-1", "fp", "r2", TTL_S)
    assert (repeat.state, repeat.request_id, repeat.response) == (ClaimState.IN_PROGRESS, "r1", None)


async def test_a_completed_key_replays_the_stored_response_byte_for_byte(backend: Backend) -> None:
    store = backend.store
    await store.claim("acme", "key-1", "fp", "r1", TTL_S)
    await store.complete("acme", "key-1", "r1", REPLAYED, TTL_S)
    replay = await store.claim("acme", "key-1", "fp", "r2", TTL_S)
    assert (replay.state, replay.request_id) == (ClaimState.DONE, "r1")
    assert replay.response == REPLAYED


async def test_a_key_used_with_another_body_is_a_mismatch(backend: Backend) -> None:
    store = backend.store
    await store.claim("acme", "key-1", "fp", "r1", TTL_S)
    running = await store.claim("acme", "key-1", "other-fp", "r2", TTL_S)
    assert (running.state, running.request_id) == (ClaimState.MISMATCH, "r1")
    await store.complete("acme", "key-1", "r1", REPLAYED, TTL_S)
    done = await store.claim("acme", "key-1", "other-fp", "r3", TTL_S)
    assert (done.state, done.response) == (ClaimState.MISMATCH, None)


async def test_an_abandoned_key_goes_to_the_next_claim(backend: Backend) -> None:
    store = backend.store
    await store.claim("acme", "key-1", "fp", "r1", TTL_S)
    await store.abandon("acme", "key-1", "r1")
    retry = await store.claim("acme", "key-1", "fp", "r2", TTL_S)
    assert (retry.state, retry.request_id) == (ClaimState.OWNER, "r2")


async def test_only_the_owner_completes_or_abandons_its_key(backend: Backend) -> None:
    store = backend.store
    await store.claim("acme", "key-1", "fp", "r1", TTL_S)
    await store.complete("acme", "key-1", "intruder", REPLAYED, TTL_S)
    await store.abandon("acme", "key-1", "intruder")
    assert (await store.claim("acme", "key-1", "fp", "r2", TTL_S)).state is ClaimState.IN_PROGRESS
    await store.complete("acme", "key-1", "r1", REPLAYED, TTL_S)
    await store.abandon("acme", "key-1", "r1")  # done: no longer a claim to drop
    assert (await store.claim("acme", "key-1", "fp", "r2", TTL_S)).state is ClaimState.DONE


async def test_the_owner_claiming_again_still_owns_the_key(backend: Backend) -> None:
    await backend.store.claim("acme", "key-1", "fp", "r1", TTL_S)
    again = await backend.store.claim("acme", "key-1", "fp", "r1", TTL_S)
    assert (again.state, again.request_id) == (ClaimState.OWNER, "r1")


async def test_idempotency_keys_are_per_tenant_and_any_string(backend: Backend) -> None:
    store = backend.store
    odd_key = "a:b\u00e9\udcff *\n" + "x" * 300
    assert (await store.claim("acme", odd_key, "fp", "r1", TTL_S)).state is ClaimState.OWNER
    assert (await store.claim("globex", odd_key, "fp", "r2", TTL_S)).state is ClaimState.OWNER
    assert (await store.claim("acme", odd_key, "fp", "r3", TTL_S)).state is ClaimState.IN_PROGRESS


async def test_an_idempotency_entry_expires_after_its_ttl(backend: Backend) -> None:
    store = backend.store
    await store.claim("acme", "key-1", "fp", "r1", 1.0)
    await store.complete("acme", "key-1", "r1", REPLAYED, 1.0)
    await backend.advance(1.2)
    assert (await store.claim("acme", "key-1", "fp", "r2", TTL_S)).state is ClaimState.OWNER


# quotas


async def test_requests_bucket_takes_its_capacity_at_once_then_waits_for_the_refill(backend: Backend) -> None:
    store, quota = backend.store, Quotas(requests_per_second=5)
    for i in range(5):
        assert (await store.take_quota("acme", f"r{i}", quota, 10, NOW, LEASE_S)).taken
    refused = await store.take_quota("acme", "r5", quota, 10, NOW, LEASE_S)
    assert refused.refused is QuotaRefusal.REQUESTS_PER_SECOND
    assert refused.retry_after_s == pytest.approx(0.2)
    assert refused.signals == {"requests_per_second": 5.0}
    assert (await store.take_quota("acme", "r5", quota, 10, NOW + 0.2, LEASE_S)).taken


async def test_tokens_bucket_refuses_with_the_deficit_wait_and_takes_back_unused_tokens(backend: Backend) -> None:
    store, quota = backend.store, Quotas(tokens_per_minute=600)  # refills 10 tokens/s
    assert (await store.take_quota("acme", "r1", quota, 400, NOW, LEASE_S)).taken
    refused = await store.take_quota("acme", "r2", quota, 300, NOW, LEASE_S)
    assert refused.refused is QuotaRefusal.TOKENS_PER_MINUTE
    assert refused.retry_after_s == pytest.approx(10.0)
    assert refused.signals == pytest.approx({"cost_tokens": 300, "tokens_available": 200, "tokens_per_minute": 600})
    await store.release_quota("acme", "r1", quota, 100, NOW)
    assert (await store.take_quota("acme", "r2", quota, 300, NOW, LEASE_S)).taken
    await store.release_quota("acme", "r2", quota, 10_000, NOW)  # never above the capacity
    assert (await store.take_quota("acme", "r3", quota, 600, NOW, LEASE_S)).taken
    assert not (await store.take_quota("acme", "r4", quota, 1, NOW, LEASE_S)).taken


async def test_a_cost_above_the_token_capacity_is_refused_with_no_retry(backend: Backend) -> None:
    refused = await backend.store.take_quota("acme", "r1", Quotas(tokens_per_minute=600), 601, NOW, LEASE_S)
    assert (refused.refused, refused.retry_after_s) == (QuotaRefusal.TOKENS_PER_MINUTE, None)
    assert refused.signals == {"cost_tokens": 601, "tokens_per_minute": 600}


async def test_concurrency_slots_are_refused_when_full_and_freed_by_release(backend: Backend) -> None:
    store, quota = backend.store, Quotas(max_concurrent=2)
    assert (await store.take_quota("acme", "r1", quota, 10, NOW, LEASE_S)).taken
    assert (await store.take_quota("acme", "r2", quota, 10, NOW, LEASE_S)).taken
    refused = await store.take_quota("acme", "r3", quota, 10, NOW, LEASE_S)
    assert (refused.refused, refused.retry_after_s) == (QuotaRefusal.MAX_CONCURRENT, 1.0)
    assert refused.signals == {"in_flight": 2, "max_concurrent": 2}
    await store.release_quota("acme", "r1", quota, 0, NOW)
    assert (await store.take_quota("acme", "r3", quota, 10, NOW, LEASE_S)).taken


async def test_releases_in_one_batch_free_every_slot_and_give_back_tokens(backend: Backend) -> None:
    store, quota = backend.store, Quotas(tokens_per_minute=600, max_concurrent=2)
    assert (await store.take_quota("acme", "r1", quota, 300, NOW, LEASE_S)).taken
    assert (await store.take_quota("acme", "r2", quota, 300, NOW, LEASE_S)).taken
    assert not (await store.take_quota("acme", "r3", quota, 10, NOW, LEASE_S)).taken
    await store.release_quotas([QuotaRelease("acme", "r1", quota, 200), QuotaRelease("acme", "r2", quota, 150)], NOW)
    await store.release_quotas([], NOW)
    assert (await store.take_quota("acme", "r3", quota, 300, NOW, LEASE_S)).taken  # 350 tokens came back
    assert (await store.take_quota("acme", "r4", quota, 1, NOW, LEASE_S)).taken  # both slots came back
    refused = await store.take_quota("acme", "r5", quota, 1, NOW, LEASE_S)
    assert refused.refused is QuotaRefusal.MAX_CONCURRENT


async def test_a_concurrency_slot_is_freed_when_its_lease_ends(backend: Backend) -> None:
    store, quota = backend.store, Quotas(max_concurrent=1)
    assert (await store.take_quota("acme", "r1", quota, 10, NOW, lease_s=30)).taken
    assert not (await store.take_quota("acme", "r2", quota, 10, NOW + 29, LEASE_S)).taken
    assert (await store.take_quota("acme", "r2", quota, 10, NOW + 30, LEASE_S)).taken


async def test_a_refusal_takes_nothing(backend: Backend) -> None:
    store = backend.store
    quota = Quotas(requests_per_second=2, tokens_per_minute=60, max_concurrent=2)
    assert not (await store.take_quota("acme", "too-big", quota, 61, NOW, LEASE_S)).taken
    assert (await store.take_quota("acme", "r1", quota, 50, NOW, LEASE_S)).taken
    assert (await store.take_quota("acme", "r2", quota, 20, NOW, LEASE_S)).refused is QuotaRefusal.TOKENS_PER_MINUTE
    assert (await store.take_quota("acme", "r3", quota, 10, NOW, LEASE_S)).taken  # r2 took no request, no slot
    assert (await store.take_quota("acme", "r4", quota, 0, NOW, LEASE_S)).refused is QuotaRefusal.MAX_CONCURRENT


async def test_refusals_come_in_admission_order_concurrency_then_requests_then_tokens(backend: Backend) -> None:
    store = backend.store
    quota = Quotas(requests_per_second=1, tokens_per_minute=60, max_concurrent=1)
    assert (await store.take_quota("acme", "r1", quota, 60, NOW, LEASE_S)).taken
    assert (await store.take_quota("acme", "r2", quota, 60, NOW, LEASE_S)).refused is QuotaRefusal.MAX_CONCURRENT
    await store.release_quota("acme", "r1", quota, 0, NOW)
    assert (await store.take_quota("acme", "r2", quota, 60, NOW, LEASE_S)).refused is QuotaRefusal.REQUESTS_PER_SECOND
    later = await store.take_quota("acme", "r2", quota, 60, NOW + 1, LEASE_S)
    assert later.refused is QuotaRefusal.TOKENS_PER_MINUTE
    assert later.retry_after_s == pytest.approx(59.0)


async def test_a_tenant_without_limits_is_always_taken(backend: Backend) -> None:
    for i in range(20):
        assert (await backend.store.take_quota("acme", f"r{i}", Quotas(), 1e9, NOW, LEASE_S)).taken


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rps=st.floats(0.5, 50), tpm=st.integers(60, 6_000),
       steps=st.lists(st.tuples(st.floats(0, 0.5), st.floats(1, 200)), min_size=1, max_size=40))
async def test_buckets_never_give_more_than_capacity_plus_refill(backend: Backend, rps: float, tpm: int,
                                                                 steps: list[tuple[float, float]]) -> None:
    tenant = f"t-{uuid.uuid4().hex}"  # a fresh budget for each example
    quota = Quotas(requests_per_second=rps, tokens_per_minute=tpm)
    now, requests, tokens = NOW, 0, 0.0
    for i, (wait_s, cost) in enumerate(steps):
        now += wait_s
        if (await backend.store.take_quota(tenant, f"r{i}", quota, cost, now, LEASE_S)).taken:
            requests, tokens = requests + 1, tokens + cost
    elapsed = now - NOW
    assert requests <= max(1.0, rps) + rps * elapsed + 1e-6
    assert tokens <= tpm + tpm / 60 * elapsed + 1e-6


# several gateways


async def test_two_gateways_share_one_concurrency_budget(backend: Backend) -> None:
    gateway_a, gateway_b = backend.store, await backend.another()
    quota = Quotas(max_concurrent=5)
    decisions = await asyncio.gather(
        *(gateway_a.take_quota("acme", f"a{i}", quota, 1, NOW, LEASE_S) for i in range(3)),
        *(gateway_b.take_quota("acme", f"b{i}", quota, 1, NOW, LEASE_S) for i in range(3)))
    assert sum(decision.taken for decision in decisions) == 5


async def test_service_published_by_one_gateway_reaches_the_others_once(backend: Backend) -> None:
    gateway_a, gateway_b = backend.store, await backend.another()
    assert await gateway_a.publish_service("gw-a", {"acme": 3.0}) == {}
    assert await gateway_b.publish_service("gw-b", {}) == {"acme": 3.0}  # first call: the others' totals so far
    assert await gateway_a.publish_service("gw-a", {"acme": 1.5, "globex": 2.0}) == {}  # its own: not echoed
    assert await gateway_b.publish_service("gw-b", {"acme": 0.25}) == pytest.approx({"acme": 1.5, "globex": 2.0})
    assert await gateway_b.publish_service("gw-b", {}) == {}
    assert await gateway_a.publish_service("gw-a", {"acme": -0.5}) == pytest.approx({"acme": 0.25})
    assert await gateway_b.publish_service("gw-b", {}) == pytest.approx({"acme": -0.5})


# streams and retries


async def test_attempts_count_per_request_and_expire(backend: Backend) -> None:
    store = backend.store
    assert [await store.note_attempt("r1", 1.0) for _ in range(3)] == [1, 2, 3]
    assert await store.note_attempt("r2", 1.0) == 1
    await backend.advance(1.2)
    assert await store.note_attempt("r1", 1.0) == 1


async def test_the_stream_owner_is_shared_and_expires(backend: Backend) -> None:
    store, other = backend.store, await backend.another()
    assert await store.stream_owner("r1") is None
    await store.set_stream_owner("r1", "gw-a", 1.0)
    assert await other.stream_owner("r1") == "gw-a"
    await backend.advance(1.2)
    assert await store.stream_owner("r1") is None


async def test_a_stream_journal_is_read_after_a_number_from_any_gateway_and_expires(backend: Backend) -> None:
    store, other = backend.store, await backend.another()
    assert await store.read_stream("r1", 0) is None
    await store.open_stream("r1", "acme", b'{"model": "chat"}', 1.0)
    await store.append_stream("r1", [StreamEvent(1, "role"), StreamEvent(2, "Par", (100,))], False, 1.0)
    await store.append_stream("r1", [StreamEvent(3, "is \u00e9", (101, 102))], False, 1.0)
    journal = await other.read_stream("r1", 1)
    assert journal is not None
    assert (journal.tenant, journal.context, journal.length, journal.done) == ("acme", b'{"model": "chat"}', 3, False)
    assert journal.events == (StreamEvent(2, "Par", (100,)), StreamEvent(3, "is \u00e9", (101, 102)))
    assert journal.token_ids == (100, 101, 102)
    await other.append_stream("r1", [StreamEvent(4, "[DONE]")], True, 1.0)
    done = await store.read_stream("r1", 4)
    assert done is not None and done.done and done.events == () and done.length == 4
    await store.append_stream("never-opened", [StreamEvent(1, "x")], False, 1.0)
    assert await store.read_stream("never-opened", 0) is None
    await backend.advance(1.2)
    assert await store.read_stream("r1", 0) is None


async def test_a_journal_event_appended_twice_is_read_once(backend: Backend) -> None:
    store = backend.store
    await store.open_stream("r2", "acme", b"{}", 60.0)
    await store.append_stream("r2", [StreamEvent(1, "a", (1,))], False, 60.0)
    await store.append_stream("r2", [StreamEvent(1, "a", (1,)), StreamEvent(2, "b", (2,))], False, 60.0)
    journal = await store.read_stream("r2", 0)
    assert journal is not None
    assert ([e.seq for e in journal.events], journal.token_ids, journal.length) == ([1, 2], (1, 2), 2)
