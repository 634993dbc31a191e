"""``POST /v1/rerank`` in-process: one row per (query, document), ordered by score."""

from __future__ import annotations

from tests.unit.gateway.conftest import BATCH, InProcessGateway

DOCUMENTS = ["Bananas are yellow.", "Paris is the capital of France.", "Berlin is in Germany."]


async def test_documents_come_back_best_first_with_their_index(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/rerank", headers=BATCH, json={
        "model": "rerank", "query": "capital of France", "documents": DOCUMENTS, "top_n": 2,
        "return_documents": True})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["index"] for r in results] == [1, 0]  # the France document first, then ties in input order
    assert results[0]["document"] == {"text": DOCUMENTS[1]}
    assert response.json()["id"] == response.headers["x-request-id"]
    (call,) = gw.workers.row_calls
    assert call.outputs == ("score",) and call.priority == 3  # batch tier: Triton's least urgent level


async def test_a_query_over_the_context_is_refused_before_any_worker_call(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/rerank", headers=BATCH, json={
        "model": "rerank", "query": "word " * 400, "documents": DOCUMENTS})
    assert response.status_code == 400 and response.json()["error"]["param"] == "query"
    assert gw.workers.row_calls == []
