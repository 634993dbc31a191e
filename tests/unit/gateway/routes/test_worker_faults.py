"""A worker that crashes, in-process: requests that produced nothing run again, streams resume from
the tokens already sent, and a crash past the attempts is ``worker_failed`` (503), counted once.
(The real crash, ``kill -9`` on a tritonserver, is tests/integration/test_worker_faults.py.)"""

from __future__ import annotations

import orjson

from tests.unit.gateway.conftest import BATCH, STANDARD, InProcessGateway

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "What is the capital of France?"}]}
EMBED = {"model": "embed", "input": ["a cat", "a kitten"]}


def _sse(body: str) -> list[tuple[str | None, str]]:
    """(id, data) of every event of an SSE body."""
    events: list[tuple[str | None, str]] = []
    event_id: str | None = None
    for line in body.splitlines():
        if line.startswith("id: "):
            event_id = line.removeprefix("id: ")
        elif line.startswith("data: "):
            events.append((event_id, line.removeprefix("data: ")))
            event_id = None
    return events


async def _status(gw: InProcessGateway, request_id: str, headers: dict[str, str]) -> dict[str, object]:
    response = await gw.client.get(f"/v1/requests/{request_id}", headers=headers)
    body: dict[str, object] = response.json()
    return body


async def test_an_embedding_whose_worker_crashes_is_sent_again_and_answered(gw: InProcessGateway) -> None:
    gw.workers.crashes = 1
    response = await gw.client.post("/v1/embeddings", headers=BATCH, json=EMBED)
    assert response.status_code == 200, response.text
    assert len(gw.workers.row_calls) == 2
    status = await _status(gw, response.headers["x-request-id"], BATCH)
    assert (status["outcome"], status["attempts"]) == ("completed", 2)
    assert gw.metric("shunter_worker_retries_total", model="embed") == 1
    assert gw.metric("shunter_requests_total", route="/v1/embeddings", model="embed", outcome="completed") == 1


async def test_a_crash_on_every_attempt_is_worker_failed_503_with_retry_after_counted_once(
        gw: InProcessGateway) -> None:
    gw.workers.crashes = 10
    response = await gw.client.post("/v1/embeddings", headers=BATCH, json=EMBED)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["code"] == "worker_failed"
    assert len(gw.workers.row_calls) == gw.gateway.admission.max_attempts == 3
    status = await _status(gw, response.headers["x-request-id"], BATCH)
    assert (status["outcome"], status["attempts"]) == ("failed(worker_failed)", 3)
    assert gw.metric("shunter_scheduled_outcomes_total", tier="batch", model="embed", outcome="failed") == 1
    assert gw.metric("shunter_in_flight_requests", model="embed") == 0


async def test_a_kserve_infer_whose_worker_crashes_is_sent_again(gw: InProcessGateway) -> None:
    gw.workers.crashes = 1
    body = {"inputs": [{"name": "features", "datatype": "FP32", "shape": [2, 64], "data": [0.0] * 128}]}
    response = await gw.client.post("/v2/models/tabular/infer", headers=BATCH, json=body)
    assert response.status_code == 200, response.text
    assert len(gw.workers.tensor_calls) == 2


async def test_a_stream_whose_worker_crashes_resumes_with_no_gap_and_no_repeat(gw: InProcessGateway) -> None:
    gw.workers.crashes, gw.workers.crash_after_chunks = 1, 2
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    events = _sse(response.text)
    assert events[-1][1] == "[DONE]"
    chunks = [orjson.loads(data) for _, data in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Paris is the capital."
    first, second = gw.workers.generations
    assert first.request.continuation == ()
    assert second.request.continuation == (100, 101)  # the ids of the two chunks the client has
    assert second.request.seed == first.request.seed is not None  # a seed is drawn once, kept on resume
    request_id = response.headers["x-request-id"]
    assert [event_id for event_id, _ in events] == [f"{request_id}:{n}" for n in range(1, len(events) + 1)]
    assert gw.metric("shunter_stream_resumes_total", kind="worker") == 1
    status = await _status(gw, request_id, STANDARD)
    assert (status["outcome"], status["attempts"]) == ("completed", 2)


async def test_a_non_streamed_chat_whose_worker_crashes_mid_generation_is_answered_whole(
        gw: InProcessGateway) -> None:
    gw.workers.crashes, gw.workers.crash_after_chunks = 1, 3
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json=CHAT)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Paris is the capital."
    assert response.json()["usage"]["completion_tokens"] == 4


async def test_a_stream_whose_workers_keep_crashing_ends_with_one_worker_failed_event(gw: InProcessGateway) -> None:
    gw.workers.crashes, gw.workers.crash_after_chunks = 10, 1
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    events = _sse(response.text)
    assert "[DONE]" not in [data for _, data in events]
    assert orjson.loads(events[-1][1])["error"]["code"] == "worker_failed"
    chunks = [orjson.loads(data) for _, data in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Paris"  # what the first worker sent, once
    assert gw.metric("shunter_requests_total", route="/v1/chat/completions", model="chat",
                     outcome="failed(worker_failed)") == 1


def _text(events: list[tuple[str | None, str]]) -> str:
    chunks = [orjson.loads(data) for _, data in events if data != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices"))


async def test_a_client_reconnecting_with_last_event_id_gets_the_rest_of_a_finished_stream(
        gw: InProcessGateway) -> None:
    first = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    events = _sse(first.text)
    last_seen = events[2][0]
    assert last_seen is not None
    again = await gw.client.post("/v1/chat/completions", headers={**STANDARD, "Last-Event-ID": last_seen},
                                 json={**CHAT, "stream": True})
    assert again.status_code == 200
    assert _sse(again.text) == events[3:]
    assert len(gw.workers.generations) == 1  # replayed from the journal, not generated again
    assert gw.metric("shunter_stream_resumes_total", kind="client") == 1


async def test_a_detached_stream_is_continued_from_its_token_ids_by_the_gateway_the_client_reconnects_to(
        gw: InProcessGateway) -> None:
    whole = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    events = _sse(whole.text)
    journal = await gw.gateway.store.read_stream(whole.headers["x-request-id"], 0)
    assert journal is not None and journal.done
    # The same stream as a gateway whose client left after three events would have left it.
    store = gw.gateway.store
    await store.open_stream("req_cut", "demo-standard", journal.context, 60.0)
    await store.append_stream("req_cut", journal.events[:3], False, 60.0)
    await store.set_stream_owner("req_cut", "-detached-", 60.0)
    resumed = await gw.client.post("/v1/chat/completions", headers={**STANDARD, "Last-Event-ID": "req_cut:3"},
                                   json={**CHAT, "stream": True})
    rest = _sse(resumed.text)
    assert [event_id for event_id, _ in rest] == [f"req_cut:{n}" for n in range(4, 4 + len(rest))]
    assert [data for _, data in rest] == [data for _, data in events[3:]][:len(rest)]
    assert _text(events[:3]) + _text(rest) == _text(events) == "Paris is the capital."
    assert gw.workers.generations[-1].request.continuation == (100, 101)
    assert gw.workers.generations[-1].request.seed == gw.workers.generations[0].request.seed


async def test_last_event_id_of_another_tenant_or_not_ours_is_refused(gw: InProcessGateway) -> None:
    first = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    last_seen = _sse(first.text)[1][0]
    assert last_seen is not None
    other = await gw.client.post("/v1/chat/completions", headers={**BATCH, "Last-Event-ID": last_seen},
                                 json={**CHAT, "stream": True})
    assert (other.status_code, other.json()["error"]["code"]) == (404, "stream_not_found")
    bad = await gw.client.post("/v1/chat/completions", headers={**STANDARD, "Last-Event-ID": "nonsense"},
                               json={**CHAT, "stream": True})
    assert (bad.status_code, bad.json()["error"]["param"]) == (400, "Last-Event-ID")


async def test_a_request_whose_worker_died_with_no_worker_back_before_its_deadline_is_worker_failed(
        gw: InProcessGateway) -> None:
    gw.workers.crashes, gw.workers.down_on_crash = 1, True
    response = await gw.client.post("/v1/embeddings", headers={**BATCH, "X-Deadline-Ms": "300"}, json=EMBED)
    assert (response.status_code, response.json()["error"]["code"]) == (503, "worker_failed")
    assert response.headers["retry-after"] == "1"
    status = await _status(gw, response.headers["x-request-id"], BATCH)
    assert (status["outcome"], status["attempts"]) == ("failed(worker_failed)", 2)
    assert len(gw.workers.row_calls) == 1  # never sent to a worker that is down
