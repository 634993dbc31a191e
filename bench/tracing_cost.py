"""Gateway CPU per request added by tracing: off, on (every request sampled and exported), side by side.

Drives the real ``RequestContextMiddleware`` in-process (no HTTP) around a handler that opens the
spans a dispatched request opens (``shunter.admission``, ``shunter.queue``, ``shunter.placement``,
``shunter.triton`` with its ``traceparent`` metadata), alternating rounds with tracing off and on,
and reports the median of each mode's CPU per request (this process, every thread: the SDK's batch
exporter included); a fourth mode samples 10 %, and a first one runs the same request without
the tracing calls at all (what the no-op checks cost). With tracing on the spans go over OTLP/HTTP
to a receiver in a child process on 127.0.0.1 (its CPU is not counted: it stands for the
collector). The difference is what tracing adds to a request; the whole request's gateway CPU
(0.69 ms ``tabular``, 1.08 ms ``embed``, the suite) is the base it is compared with in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from typing import Annotated

import typer
from starlette.requests import HTTPConnection
from starlette.types import Receive, Scope, Send

from gateway import tracing
from gateway.context import RequestContextMiddleware, request_context
from gateway.metrics import GatewayMetrics
from settings.observability import TracingSettings

app = typer.Typer(add_completion=False)
_RECEIVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""
_SCOPE: Scope = {"type": "http", "method": "POST", "path": "/v1/embeddings", "headers": [(b"host", b"x")],
                 "query_string": b""}


async def _handler(scope: Scope, receive: Receive, send: Send) -> None:
    """What a dispatched request does with tracing (the spans), and a 200 answer."""
    context = request_context(HTTPConnection(scope))
    context.tenant, context.tier, context.model = "demo-premium", "premium", "embed"
    with tracing.span("shunter.admission", lambda: {"shunter.tenant": "demo-premium", "shunter.tier": "premium"}):
        pass
    with tracing.span("shunter.queue") as queued:
        pass
    if queued is not None:
        with tracing.span("shunter.placement", lambda: {"shunter.pool": "local-cpu", "shunter.worker": "w0"}):
            pass
    with tracing.span("shunter.triton", lambda: {"shunter.worker": "w0", "shunter.model": "embed"}):
        tracing.triton_headers()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _untraced_handler(scope: Scope, receive: Receive, send: Send) -> None:
    """The same request without the tracing calls: the base of the no-op's cost."""
    context = request_context(HTTPConnection(scope))
    context.tenant, context.tier, context.model = "demo-premium", "premium", "embed"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _requests(middleware: RequestContextMiddleware, requests: int) -> None:
    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: object) -> None:
        pass

    for _ in range(requests):
        await middleware(dict(_SCOPE), receive, send)


def _round(middleware: RequestContextMiddleware, requests: int, settings: TracingSettings | None) -> float:
    """CPU seconds per request over ``requests`` requests, with ``settings``' tracing (until every span is exported)."""
    started = time.process_time()
    if settings is not None:
        tracing.enable(settings, "bench")
    asyncio.run(_requests(middleware, requests))
    tracing.disable()  # exports what is left: counted
    return (time.process_time() - started) / requests


@app.command()
def main(requests: Annotated[int, typer.Option(help="requests per round")] = 5000,
         rounds: Annotated[int, typer.Option(help="rounds of each mode, alternating")] = 7,
         receiver_port: Annotated[int, typer.Option(help="port of the OTLP receiver on 127.0.0.1")] = 18790) -> None:
    receiver = subprocess.Popen([sys.executable, "-c", _RECEIVER, str(receiver_port)])
    try:
        time.sleep(1.0)
        traced = RequestContextMiddleware(_handler, GatewayMetrics(), known_models=["embed"])
        untraced = RequestContextMiddleware(_untraced_handler, GatewayMetrics(), known_models=["embed"])
        on = TracingSettings(otlp_endpoint=f"http://127.0.0.1:{receiver_port}")
        tenth = TracingSettings(otlp_endpoint=on.otlp_endpoint, sample_ratio=0.1)
        modes = {"no tracing calls": (untraced, None), "off": (traced, None), "on, 10 % sampled": (traced, tenth),
                 "on": (traced, on)}
        per_mode: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(rounds):
            for mode, (middleware, settings) in modes.items():
                per_mode[mode].append(_round(middleware, requests, settings))
        for mode, values in per_mode.items():
            print(f"{mode:>16}: median {statistics.median(values) * 1e6:6.1f} µs CPU per request "
                  f"(rounds: {', '.join(f'{v * 1e6:.1f}' for v in values)})")
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)


if __name__ == "__main__":
    app()
