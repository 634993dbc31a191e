"""An OTLP/HTTP trace receiver on 127.0.0.1 for the tracing test: the collector's side of the
OTLP boundary (``POST /v1/traces``, protobuf from the Python SDK, JSON from Triton), keeping every
span it was sent. A real HTTP server decoding with the OpenTelemetry protobuf definitions; what a
production collector does beyond receiving (processing, storage) is not what the test checks."""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str  # 32 hex
    span_id: str  # 16 hex
    parent_span_id: str  # 16 hex, "" for a root
    attributes: dict[str, object]


_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def _ids_as_base64(value: Any) -> Any:
    """OTLP/JSON writes trace and span ids in hex, where protobuf's JSON mapping expects base64."""
    if isinstance(value, dict):
        return {key: base64.b64encode(bytes.fromhex(item)).decode() if key in _ID_FIELDS and isinstance(item, str)
                else _ids_as_base64(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_ids_as_base64(item) for item in value]
    return value


def _spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    received = []
    for resource_spans in request.resource_spans:
        service = next((a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"),
                       "")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                attributes = {a.key: json_format.MessageToDict(a.value) for a in span.attributes}
                received.append(ReceivedSpan(service, span.name, span.trace_id.hex(), span.span_id.hex(),
                                             span.parent_span_id.hex(), attributes))
    return received


class OtlpCollector:
    """``start()`` listens on 127.0.0.1:``port``; ``spans`` holds what arrived; ``stop()``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.spans: list[ReceivedSpan] = []
        self.posts = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                if "json" in self.headers.get("Content-Type", ""):
                    json_format.ParseDict(_ids_as_base64(json.loads(body)), request, ignore_unknown_fields=True)
                else:
                    request.ParseFromString(body)
                collector.received(_spans(request))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def received(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self.posts += 1
            self.spans.extend(spans)

    def trace(self, trace_id: str, service_prefixes: tuple[str, ...], timeout_s: float) -> list[ReceivedSpan]:
        """The spans of ``trace_id`` once services starting with each of ``service_prefixes`` sent
        some (or what arrived by ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                spans = [s for s in self.spans if s.trace_id == trace_id]
            services = {s.service for s in spans}
            if all(any(name.startswith(prefix) for name in services) for prefix in service_prefixes):
                return spans
            if time.monotonic() > deadline:
                return spans
            time.sleep(0.1)
