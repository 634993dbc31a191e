"""Traces through the gateway into Triton: a lean stack serving only ``embed`` with tracing on in
``observability.yaml`` exports to an OTLP/HTTP receiver on 127.0.0.1 (``otlp_collector``); one
request sent with a client's W3C ``traceparent`` then has, under the client's trace id, the
gateway's server span and its admission, queue, placement and Triton-call children, and Triton's
own spans (``--trace-config mode=opentelemetry``) under the Triton-call span; the access-log line
names the same trace id; no span carries the input or the key."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from tests.integration.conftest import KEYS, RunningStack, make_paths, running_stack
from tests.integration.otlp_collector import OtlpCollector, ReceivedSpan
from tests.integration.ports import port

pytestmark = pytest.mark.integration
COLLECTOR_PORT = port(28050)
SECRET = "marmalade-otter-5521"  # the input; must appear in no span
SPANS_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def collector() -> Iterator[OtlpCollector]:
    receiver = OtlpCollector(COLLECTOR_PORT)
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


@pytest.fixture(scope="module")
def traced_stack(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path,
                 collector: OtlpCollector) -> Iterator[RunningStack]:
    paths = make_paths(tmp_path_factory.mktemp("traced"), port(28020), models=("embed",))
    paths.observability_file.write_text(yaml.safe_dump({"tracing": {"otlp_endpoint": collector.endpoint}}))
    with running_stack(paths, port(28040), port(28041)) as running:
        yield running


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [(s.service, s.name) for s in spans])
    return found[0]


def test_one_trace_runs_from_the_client_through_the_gateway_into_triton(
        traced_stack: RunningStack, collector: OtlpCollector) -> None:
    trace_id, client_span_id = secrets.token_hex(16), secrets.token_hex(8)
    with traced_stack.client() as client:
        response = client.post("/v1/embeddings", json={"model": "embed", "input": [f"{SECRET} {time.time()}"]},
                               headers={"traceparent": f"00-{trace_id}-{client_span_id}-01"})
    assert response.status_code == 200, response.text
    spans = collector.trace(trace_id, ("shunter-gateway", "shunter-triton"), SPANS_TIMEOUT_S)

    server = _one(spans, "POST /v1/embeddings")
    assert server.parent_span_id == client_span_id
    assert server.attributes["shunter.request_id"] == {"stringValue": response.headers["x-request-id"]}
    assert server.attributes["shunter.tenant"] == {"stringValue": "demo-premium"}
    assert server.attributes["shunter.outcome"] == {"stringValue": "completed"}
    for name in ("shunter.admission", "shunter.queue", "shunter.placement"):
        assert _one(spans, name).parent_span_id == server.span_id
    assert _one(spans, "shunter.placement").attributes["shunter.worker"] == {"stringValue": traced_stack.worker.name}
    call = _one(spans, "shunter.triton")
    assert call.parent_span_id == server.span_id

    triton = [s for s in spans if s.service == "shunter-triton"]
    infer = _one(triton, "InferRequest")
    assert infer.parent_span_id == call.span_id  # Triton continued the gateway's traceparent
    assert {s.name for s in triton} >= {"InferRequest", "embed"}
    assert all(s.trace_id == trace_id for s in spans)

    log_lines = (traced_stack.paths.logs / f"gateway-{port(28040)}.access.jsonl").read_text().splitlines()
    line = next(orjson.loads(x) for x in log_lines if response.headers["x-request-id"] in x)
    assert line["trace_id"] == trace_id

    exported = json.dumps([s.attributes for s in collector.spans])
    assert SECRET not in exported and KEYS["premium"] not in exported
