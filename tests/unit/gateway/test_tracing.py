"""The gateway's spans in-process (fake workers, spans kept in memory): a client's traceparent is
continued, a dispatched request has its admission, queue, placement and worker-call spans, the
access log names the trace, and with tracing off nothing is traced."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway import tracing
from settings.observability import TracingSettings
from tests.unit.gateway.conftest import PREMIUM, InProcessGateway

TRACE_ID, CLIENT_SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.enable(TracingSettings(otlp_endpoint="http://127.0.0.1:1"), "shunter-gateway", exporter)
    try:
        yield exporter
    finally:
        tracing.disable()


async def test_a_traced_request_continues_the_clients_trace_with_its_scheduling_spans(
        gw: InProcessGateway, spans: InMemorySpanExporter) -> None:
    response = await gw.client.post("/v1/embeddings", json={"model": "embed", "input": "a cat"},
                                    headers={**PREMIUM, "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"})
    assert response.status_code == 200
    assert tracing._state.provider is not None
    tracing._state.provider.force_flush()
    by_name = {span.name: span for span in spans.get_finished_spans()}
    server = by_name["POST /v1/embeddings"]
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.parent is not None and format(server.parent.span_id, "016x") == CLIENT_SPAN_ID
    assert server.attributes is not None and server.attributes["shunter.tenant"] == "demo-premium"
    for name in ("shunter.admission", "shunter.queue", "shunter.placement"):
        parent = by_name[name].parent
        assert parent is not None and parent.span_id == server.context.span_id
    line = orjson.loads((gw.logs / "gateway.access.jsonl").read_text().splitlines()[-1])
    assert line["trace_id"] == TRACE_ID


async def test_with_tracing_off_no_trace_id_is_logged(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/embeddings", json={"model": "embed", "input": "a cat"},
                                    headers={**PREMIUM, "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"})
    assert response.status_code == 200 and not tracing.enabled()
    line = orjson.loads((gw.logs / "gateway.access.jsonl").read_text().splitlines()[-1])
    assert "trace_id" not in line
