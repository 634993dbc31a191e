"""``Idempotency-Key`` in-process (the embedded store): replay, in progress, another body, failures
release the key, streams are not replayed, keys are per tenant."""

from __future__ import annotations

import asyncio

from gateway.errors import UnavailableError
from tests.unit.gateway.conftest import BATCH, STANDARD, InProcessGateway

EMBED = {"model": "embed", "input": ["a cat"]}


def _keyed(key: str, headers: dict[str, str] = STANDARD) -> dict[str, str]:
    return {**headers, "Idempotency-Key": key}


async def test_a_repeat_gets_the_first_response_byte_for_byte_without_a_second_call(gw: InProcessGateway) -> None:
    first = await gw.client.post("/v1/embeddings", headers=_keyed("k1"), json=EMBED)
    again = await gw.client.post("/v1/embeddings", headers=_keyed("k1"), json=EMBED)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["x-original-request-id"] == first.headers["x-request-id"]
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    assert len(gw.workers.row_calls) == 1


async def test_the_same_key_with_another_body_is_422(gw: InProcessGateway) -> None:
    await gw.client.post("/v1/embeddings", headers=_keyed("k2"), json=EMBED)
    other = await gw.client.post("/v1/embeddings", headers=_keyed("k2"), json={"model": "embed", "input": ["a dog"]})
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


async def test_a_repeat_while_the_first_runs_is_409_with_retry_after(gw: InProcessGateway) -> None:
    gw.workers.gate.clear()
    first = asyncio.ensure_future(gw.client.post("/v1/embeddings", headers=_keyed("k3"), json=EMBED))
    for _ in range(100):
        if gw.workers.row_calls:
            break
        await asyncio.sleep(0.01)
    repeat = await gw.client.post("/v1/embeddings", headers=_keyed("k3"), json=EMBED)
    assert repeat.status_code == 409 and repeat.json()["error"]["code"] == "idempotency_in_progress"
    assert repeat.headers["retry-after"] == "1"
    gw.workers.gate.set()
    assert (await first).status_code == 200


async def test_a_failed_first_request_releases_the_key_for_a_retry(gw: InProcessGateway) -> None:
    gw.workers.fail_with = UnavailableError("model embed is saturated; retry shortly", retry_after_s=1)
    failed = await gw.client.post("/v1/embeddings", headers=_keyed("k4"), json=EMBED)
    assert failed.status_code == 503
    gw.workers.fail_with = None
    retried = await gw.client.post("/v1/embeddings", headers=_keyed("k4"), json=EMBED)
    assert retried.status_code == 200 and "idempotent-replayed" not in retried.headers
    assert len(gw.workers.row_calls) == 2


async def test_a_client_error_is_stored_and_replayed_like_a_success(gw: InProcessGateway) -> None:
    bad = {"model": "embed", "input": [""]}
    first = await gw.client.post("/v1/embeddings", headers=_keyed("k5"), json=bad)
    again = await gw.client.post("/v1/embeddings", headers=_keyed("k5"), json=bad)
    assert first.status_code == again.status_code == 400
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"


async def test_a_streamed_response_is_not_replayed(gw: InProcessGateway) -> None:
    chat = {"model": "chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    first = await gw.client.post("/v1/chat/completions", headers=_keyed("k6"), json=chat)
    assert first.status_code == 200 and first.text.rstrip().endswith("data: [DONE]")
    again = await gw.client.post("/v1/chat/completions", headers=_keyed("k6"), json=chat)
    assert again.status_code == 409 and again.json()["error"]["code"] == "idempotency_stream_not_replayable"
    assert len(gw.workers.generations) == 1


async def test_keys_belong_to_one_tenant(gw: InProcessGateway) -> None:
    await gw.client.post("/v1/embeddings", headers=_keyed("shared-key"), json=EMBED)
    theirs = await gw.client.post("/v1/embeddings", headers=_keyed("shared-key", BATCH), json=EMBED)
    assert theirs.status_code == 200 and "idempotent-replayed" not in theirs.headers
    assert len(gw.workers.row_calls) == 2


async def test_a_request_with_an_unknown_api_key_is_refused_not_replayed(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/embeddings", json=EMBED,
                                    headers={"Authorization": "Bearer nope", "Idempotency-Key": "k7"})
    assert response.status_code == 401
