"""OpenTelemetry spans of the gateway, exported over OTLP/HTTP when ``observability.yaml`` turns tracing on.

``enable(settings, service_name)`` makes the process's tracer (the SDK's ``TracerProvider``, sampled
``ParentBased(TraceIdRatioBased(sample_ratio))``, a batch processor and the OTLP/HTTP exporter to
``<otlp_endpoint>/v1/traces``); ``disable()`` flushes and drops it. While it is off (the default)
no tracer exists, the SDK is not even imported, and every helper here returns at its first check:
``server_span`` yields None, ``span`` yields a shared no-op, ``current`` returns None.

Per request the context middleware opens a server span (``server_span``), continuing a client's
W3C ``traceparent`` when one is sent (its sampled flag decides), and handlers, the dispatcher and
the Triton transport open child spans with ``span(name, attributes)``: ``shunter.admission``,
``shunter.queue``, ``shunter.placement``, ``shunter.triton``. The Triton call sends the current
span as ``traceparent`` gRPC metadata (``triton_headers``), so Triton's own OpenTelemetry spans
(``--trace-config mode=opentelemetry``, rendered by ``settings.observability.traced_workers``)
join the same trace. Attributes are identifiers, codes and numbers the gateway made or
configured; never a payload, a header value or a key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from settings.observability import TracingSettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

Attributes = Mapping[str, str | int | float | bool]
_PROPAGATOR = TraceContextTextMapPropagator()
_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()
_TRACEPARENT = b"traceparent"


class _State:
    provider: TracerProvider | None = None
    tracer: trace.Tracer | None = None


_state = _State()


def enable(settings: TracingSettings, service_name: str, exporter: SpanExporter | None = None) -> None:
    """Start exporting this process's spans to ``settings.otlp_endpoint`` (replacing any earlier
    tracer); ``exporter`` replaces the OTLP exporter (in-process tests)."""
    if settings.otlp_endpoint is None:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    disable()
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}),
                              sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)))
    if exporter is None:
        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint.rstrip("/") + "/v1/traces", timeout=5)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
    _state.provider, _state.tracer = provider, provider.get_tracer("shunter.gateway")


def disable() -> None:
    """Flush the spans not yet exported (bounded) and stop tracing."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.force_flush(timeout_millis=5000)
        provider.shutdown()


def enabled() -> bool:
    return _state.tracer is not None


@contextlib.contextmanager
def server_span(name: str, headers: list[tuple[bytes, bytes]]) -> Iterator[trace.Span]:
    """The request's server span, current while the request runs (callers check ``enabled()`` first)."""
    tracer = _state.tracer
    assert tracer is not None
    carrier = {key.decode("latin-1"): value.decode("latin-1") for key, value in headers if key == _TRACEPARENT}
    parent = _PROPAGATOR.extract(carrier) if carrier else None
    with tracer.start_as_current_span(name, context=parent, kind=trace.SpanKind.SERVER,
                                      record_exception=False) as opened:
        yield opened


def trace_id(opened: trace.Span) -> str | None:
    """The span's W3C trace id (32 hex) when it is sampled, else None."""
    span_context = opened.get_span_context()
    return format(span_context.trace_id, "032x") if span_context.trace_flags.sampled else None


def span(name: str, attributes: Callable[[], Attributes] | None = None
         ) -> contextlib.AbstractContextManager[trace.Span | None]:
    """A child of the current span, current inside the ``with``, with ``attributes()`` (called only
    when traced); a shared no-op when tracing is off or the request is not sampled. An exception
    leaving it marks it failed with its type and code only."""
    tracer = _state.tracer
    if tracer is None or not trace.get_current_span().is_recording():
        return _NO_SPAN
    return _child(tracer, name, None if attributes is None else attributes())


@contextlib.contextmanager
def _child(tracer: trace.Tracer, name: str, attributes: Attributes | None) -> Iterator[trace.Span]:
    with tracer.start_as_current_span(name, attributes=attributes, record_exception=False,
                                      set_status_on_exception=False) as opened:
        try:
            yield opened
        except BaseException as exc:
            failed(opened, type(exc).__name__, getattr(exc, "code", None))
            raise


def failed(opened: trace.Span, error_type: str, code: object = None) -> None:
    """Mark ``opened`` failed: the error's type and the taxonomy's code, never its message."""
    opened.set_status(trace.Status(trace.StatusCode.ERROR))
    opened.set_attribute("error.type", error_type)
    if isinstance(code, str):
        opened.set_attribute("shunter.error_code", code)


def current() -> otel_context.Context | None:
    """The current trace context to carry into another task (None when tracing is off)."""
    return None if _state.tracer is None else otel_context.get_current()


@contextlib.contextmanager
def attached(carried: otel_context.Context | None) -> Iterator[None]:
    """Make ``carried`` (from ``current``) the current context inside the ``with``."""
    if carried is None:
        yield
        return
    token = otel_context.attach(carried)
    try:
        yield
    finally:
        otel_context.detach(token)


def triton_headers() -> dict[str, str] | None:
    """``traceparent`` metadata for a Triton call made under the current span; None when not traced."""
    if _state.tracer is None or not trace.get_current_span().is_recording():
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier
