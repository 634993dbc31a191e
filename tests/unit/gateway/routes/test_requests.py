"""Queueing as a client sees it, in-process: deadlines, disconnects while queued, request status."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import httpx

from tests.unit.gateway.conftest import BATCH, PREMIUM, STANDARD, InProcessGateway

FILL_ROWS = 128  # embed: 64 rows x 2 instances x 2 calls in flight, of which batch may fill half


async def _fill_batch_share(gw: InProcessGateway) -> asyncio.Task[httpx.Response]:
    """A batch-tier embedding that takes the batch tier's whole share of the worker and is held
    there (the fake's gate is closed) until the test opens the gate."""
    gw.workers.gate.clear()
    texts = [f"text {i}" for i in range(FILL_ROWS)]
    body = {"model": "embed", "input": texts}
    task = asyncio.ensure_future(gw.client.post("/v1/embeddings", headers=BATCH, json=body))
    for _ in range(100):
        if gw.workers.row_calls:
            return task
        await asyncio.sleep(0.01)
    raise AssertionError("the filling request never reached the worker")


async def _queued_ids(gw: InProcessGateway, expected: int) -> list[str]:
    for _ in range(100):
        queued = [q.request_id for q in gw.gateway.dispatcher.scheduler.queue.queued()]
        if len(queued) >= expected:
            return queued
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {expected} requests queued")


async def test_a_request_past_its_deadline_in_the_queue_is_504_and_never_reaches_a_worker(
        gw: InProcessGateway) -> None:
    filler = await _fill_batch_share(gw)
    late = await gw.client.post("/v1/embeddings", headers={**BATCH, "X-Deadline-Ms": "100"},
                                json={"model": "embed", "input": ["too late"]})
    assert late.status_code == 504
    assert late.json()["error"]["code"] == "deadline_exceeded"
    assert len(gw.workers.row_calls) == 1
    gw.workers.gate.set()
    assert (await filler).status_code == 200
    status = await gw.client.get(f"/v1/requests/{late.headers['x-request-id']}", headers=BATCH)
    assert status.json()["status"] == "expired"
    assert status.json()["outcome"] == "expired(deadline_exceeded)"


async def test_a_higher_tier_is_served_while_the_lower_one_waits(gw: InProcessGateway) -> None:
    filler = await _fill_batch_share(gw)
    waiting = asyncio.ensure_future(gw.client.post("/v1/embeddings", headers=BATCH,
                                                   json={"model": "embed", "input": ["later"]}))
    (queued_id,) = await _queued_ids(gw, 1)
    listed = await gw.client.get("/v1/requests", headers=BATCH, params={"status": "queued"})
    assert [r["id"] for r in listed.json()["data"]] == [queued_id]
    detail = (await gw.client.get(f"/v1/requests/{queued_id}", headers=BATCH)).json()
    assert detail["status"] == "queued" and detail["queue_position"] == 0
    premium = asyncio.ensure_future(gw.client.post("/v1/embeddings", headers=PREMIUM,
                                                   json={"model": "embed", "input": ["now"]}))
    for _ in range(100):
        if len(gw.workers.row_calls) == 2:
            break
        await asyncio.sleep(0.01)
    assert gw.workers.row_calls[1].priority == 1  # premium reached the worker past the queued batch request
    gw.workers.gate.set()
    responses = await asyncio.gather(filler, waiting, premium)
    assert [r.status_code for r in responses] == [200, 200, 200]


async def test_another_tenant_cannot_see_a_request(gw: InProcessGateway) -> None:
    done = await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": "a"})
    request_id = done.headers["x-request-id"]
    mine = await gw.client.get(f"/v1/requests/{request_id}", headers=STANDARD)
    assert mine.status_code == 200 and mine.json()["outcome"] == "completed" and mine.json()["pool"] == "local-cpu"
    theirs = await gw.client.get(f"/v1/requests/{request_id}", headers=BATCH)
    assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "request_not_found"


async def _call_with_disconnect(gw: InProcessGateway, path: str, body: bytes,
                                disconnect: asyncio.Event) -> list[dict[str, object]]:
    """Drive the ASGI app directly: send the body, then report ``http.disconnect`` once
    ``disconnect`` is set (httpx's ASGI transport cannot disconnect mid-request)."""
    sent: list[dict[str, object]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, object]:
        if messages:
            return messages.pop()
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    headers = [(b"authorization", BATCH["Authorization"].encode()), (b"content-type", b"application/json")]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 1), "server": ("gateway", 80)}
    app: Awaitable[None] = gw.app(scope, receive, send)  # type: ignore[arg-type]
    await asyncio.wait_for(app, timeout=10)
    return sent


async def test_a_client_that_leaves_while_queued_leaves_the_queue_at_once(gw: InProcessGateway) -> None:
    filler = await _fill_batch_share(gw)
    gone = asyncio.Event()
    call = asyncio.ensure_future(_call_with_disconnect(
        gw, "/v1/embeddings", b'{"model": "embed", "input": ["bye"]}', gone))
    await _queued_ids(gw, 1)
    gone.set()
    await call
    assert list(gw.gateway.dispatcher.scheduler.queue.queued()) == []
    assert len(gw.workers.row_calls) == 1  # it never reached the worker
    assert gw.metric("shunter_requests_total", route="/v1/embeddings", model="embed",
                     outcome="cancelled(client_closed)") == 1
    gw.workers.gate.set()
    assert (await filler).status_code == 200


async def test_a_client_that_leaves_mid_generation_cancels_it_on_the_worker(gw: InProcessGateway) -> None:
    gw.workers.gate.clear()
    gone = asyncio.Event()
    call = asyncio.ensure_future(_call_with_disconnect(
        gw, "/v1/chat/completions", b'{"model": "chat", "messages": [{"role": "user", "content": "hi"}]}', gone))
    for _ in range(100):
        if gw.workers.generations:
            break
        await asyncio.sleep(0.01)
    gone.set()
    await call
    (generation,) = gw.workers.generations
    assert generation.cancelled
    assert gw.gateway.dispatcher.scheduler.in_flight == {}
