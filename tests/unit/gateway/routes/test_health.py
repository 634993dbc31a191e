"""Liveness, readiness and ``/metrics`` in-process."""

from __future__ import annotations

from tests.unit.gateway.conftest import STANDARD, InProcessGateway


async def test_ready_only_while_every_served_model_has_a_ready_worker(gw: InProcessGateway) -> None:
    assert (await gw.client.get("/healthz")).json() == {"status": "ok"}
    ready = await gw.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["models"]["chat"] is True
    gw.workers.ready = False
    await gw.gateway.transport.refresh()
    assert (await gw.client.get("/readyz")).status_code == 503
    assert (await gw.client.get("/v2/health/ready")).status_code == 400
    assert (await gw.client.get("/v2/health/live")).status_code == 200
    assert (await gw.client.get("/healthz")).status_code == 200


async def test_metrics_count_each_request_once_by_route_model_and_outcome(gw: InProcessGateway) -> None:
    await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": "a"})
    await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": "nope", "input": "a"})
    text = (await gw.client.get("/metrics")).text
    assert 'shunter_requests_total{model="embed",outcome="completed",route="/v1/embeddings"} 1.0' in text
    assert 'outcome="rejected(model_not_found)"' in text
    assert 'shunter_worker_model_ready{model="chat",worker="local-cpu-0"} 1.0' in text
