"""The admission adapter: an HTTP request becomes the core's ``Request`` with its tier's SLO, the
queue deadline (tier or ``X-Deadline-Ms``, whichever is sooner) and the routed version."""

from __future__ import annotations

import pytest
from starlette.requests import Request as HttpRequest

from gateway.admission import queue_deadline_s
from gateway.errors import InvalidRequestError
from tests.unit.gateway.conftest import BATCH, PREMIUM, InProcessGateway


def _http(headers: dict[str, str]) -> HttpRequest:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return HttpRequest({"type": "http", "method": "POST", "path": "/", "headers": raw, "query_string": b""})


def test_the_queue_deadline_is_the_tier_deadline_or_the_clients_if_sooner() -> None:
    assert queue_deadline_s(_http({}), 30.0, now=100.0) == 130.0
    assert queue_deadline_s(_http({"X-Deadline-Ms": "250"}), 30.0, now=100.0) == 100.25
    assert queue_deadline_s(_http({"X-Deadline-Ms": "90000"}), 30.0, now=100.0) == 130.0
    for bad in ("0", "-5", "1.5", "soon", "86400001"):
        with pytest.raises(InvalidRequestError):
            queue_deadline_s(_http({"X-Deadline-Ms": bad}), 30.0, now=100.0)


async def test_admitted_requests_carry_their_tier_slo_and_cost(gw: InProcessGateway) -> None:
    slo = gw.gateway.scheduling.slo
    for headers in (PREMIUM, BATCH):
        response = await gw.client.post("/v1/embeddings", headers=headers, json={"model": "embed", "input": ["a b"]})
        assert response.status_code == 200
    record = gw.gateway.dispatcher.statuses
    premium = record.recent("demo-premium", None, 1)[0]
    batch = record.recent("demo-batch", None, 1)[0]
    assert premium.tier == "premium" and batch.tier == "batch"
    assert slo[gw.gateway.tenants.authenticate("demo-premium-key").tier].deadline_s == 30  # type: ignore[union-attr]
    calls = gw.workers.row_calls
    assert [c.priority for c in calls] == [1, 3] and all(c.version == 1 for c in calls)
