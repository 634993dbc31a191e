"""The gateway's FastAPI application and its composition at startup.

``create_app(paths)`` reads the stack and tenants configuration once, loads each served model's
tokenizer from its artifacts and, at startup, makes the workers' transport (a gRPC client per
Triton worker, with readiness polling) and the scheduler's driver. Every error leaves through
``_error_response``: the OpenAI error body with the status from ``errors.py``, ``x-request-id``
added by the context middleware.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.body_limit import BodyLimitMiddleware
from gateway.capacity import CapacityPlan
from gateway.composition import GatewaySetup, TransportFactory, running
from gateway.context import RequestContextMiddleware, request_context
from gateway.errors import GatewayError, InvalidRequestError, UnprocessableError
from gateway.idempotency import IdempotencyMiddleware
from gateway.metrics import GatewayMetrics
from gateway.metrics_access import MetricsAccessMiddleware
from gateway.replicas import replicas_url
from gateway.responses import JSONResponse
from gateway.routes import health, kserve, openai, requests, rerank
from gateway.tokenization import LlmTokenizer, TextTokenizer
from gateway.transport.protocol import Transport
from gateway.transport.triton.transport import TritonTransport
from scheduling.outcomes import Outcome
from scheduling.scheduler import Policy
from settings.access_log import open_access_log
from settings.capacity import load_capacity
from settings.gateway import load_gateway_settings, read_metrics_token
from settings.observability import load_observability
from settings.paths import StackPaths
from settings.scheduling import load_scheduling
from settings.stack import StackConfig, WorkloadKind, load_stack_config
from settings.tenants import load_tenants
from settings.workers import DnsResolver, WorkerAddress, current_workers, worker_addresses


def triton_transport(config: StackConfig, addresses: Sequence[WorkerAddress], poll_interval_s: float) -> Transport:
    """The production transport: a gRPC client per Triton worker slot (``addresses``)."""
    llm_models = frozenset(m.name for m in config.models if m.kind is WorkloadKind.LLM)
    if any(pool.discovery == "dns" for pool in config.pools):  # pods behind headless Services
        resolver = DnsResolver()
        return TritonTransport.connect([], poll_interval_s, llm_models, lambda: current_workers(config, resolver))
    return TritonTransport.connect(addresses, poll_interval_s, llm_models)


def load_tokenizers(config: StackConfig, paths: StackPaths) -> tuple[dict[str, LlmTokenizer], dict[str, TextTokenizer]]:
    """Each model's tokenizer, from its artifacts: (LLM tokenizers, text-encoder tokenizers)."""
    llm: dict[str, LlmTokenizer] = {}
    text: dict[str, TextTokenizer] = {}
    for model in config.models:
        artifacts = paths.artifacts / model.name
        if model.kind is WorkloadKind.LLM:
            llm[model.name] = LlmTokenizer(artifacts / "model.gguf")
        elif model.kind in (WorkloadKind.EMBEDDING, WorkloadKind.RERANK):
            text[model.name] = TextTokenizer(artifacts / "tokenizer.json")
    return llm, text


def _error_response(request: Request, error: GatewayError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    request_context(request).ending = error.ending
    kserve = request.url.path.startswith("/v2/")
    body = error.kserve_body() if kserve else error.body()
    return JSONResponse(body, status_code=error.status, headers={**error.headers(), **(headers or {})})


_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}


def _is_field(part: object) -> bool:
    """False for the union-member tags pydantic puts in error locations (``str``, ``list[str]``)."""
    text = str(part)
    return text != "body" and text.lower() not in _TYPE_TAGS and "[" not in text and not text[:1].isupper()


# pydantic error types that mean "the right JSON type, a value out of range" (400, not 422)
_VALUE_ERRORS = frozenset({
    "greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of", "finite_number",
    "too_short", "too_long", "string_too_short", "string_too_long", "literal_error", "enum", "invalid_text",
    "value_error",
})


def _param(error: Mapping[str, Any]) -> str | None:
    return ".".join(str(part) for part in error.get("loc", ()) if _is_field(part)) or None


def _within(param: str | None, parent: str | None) -> bool:
    return param == parent or (param is not None and parent is not None and param.startswith(parent + "."))


def _validation_error(exc: RequestValidationError) -> GatewayError:
    """400 for bad JSON, a missing parameter or a value out of range; 422 for a value of the wrong
    type. Of a union (``str | list[str]``), a value error of any member decides."""
    errors: list[dict[str, Any]] = list(exc.errors())
    first: dict[str, Any] = errors[0] if errors else {}
    param = _param(first)
    if first.get("type") == "json_invalid":
        return InvalidRequestError(f"request body is not valid JSON: {first.get('msg', '')}",
                                   code="invalid_json")
    if first.get("type") == "missing":
        return InvalidRequestError(f"missing required parameter '{param}'", param=param,
                                   code="missing_parameter")
    value_error = next((e for e in errors if e.get("type") in _VALUE_ERRORS and _within(_param(e), param)), None)
    if value_error is not None:
        where = _param(value_error)
        return InvalidRequestError(f"invalid value for '{where}': {value_error.get('msg', 'out of range')}",
                                   param=where, code="invalid_value")
    return UnprocessableError(f"invalid value for '{param}': {first.get('msg', 'wrong type')}", param=param)


def _install_error_handlers(app: FastAPI) -> None:
    async def gateway_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)
        return _error_response(request, exc)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _error_response(request, _validation_error(exc))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        error = GatewayError(str(exc.detail), code=f"http_{exc.status_code}")
        error.status, error.type, error.outcome = exc.status_code, "invalid_request_error", Outcome.REJECTED
        return _error_response(request, error, exc.headers)  # a 405 carries Allow

    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        return _error_response(request, GatewayError("internal error; the request id identifies it"))

    app.add_exception_handler(GatewayError, gateway_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)


def create_app(paths: StackPaths, poll_interval_s: float = 1.0, policy: Policy | None = None,
               control_url: str | None = None, transport: TransportFactory = triton_transport,
               process_name: str = "gateway") -> FastAPI:
    """The gateway for the stack in ``paths``; ``policy`` overrides scheduling.yaml's. With
    ``control_url``, model versions and traffic weights follow the control plane's routing
    (polled with the admin token in ``paths``); without it, each model's configured version.
    ``transport`` makes the workers' transport at startup (Triton's by default). The access log
    (``observability.yaml``) is ``<state_dir>/logs/<process_name>.access.jsonl``."""
    config = load_stack_config(paths.pools_file, paths.models_file)
    scheduling = load_scheduling(paths.scheduling_file, config, policy)
    llm_tokenizers, text_tokenizers = load_tokenizers(config, paths)
    settings = load_gateway_settings(paths.gateway_file)
    capacity = load_capacity(paths.capacity_file, config, scheduling)
    setup = GatewaySetup(
        config=config, scheduling=scheduling, tenants=load_tenants(paths.tenants_file),
        settings=settings, llm_tokenizers=llm_tokenizers,
        text_tokenizers=text_tokenizers,
        metrics=GatewayMetrics(ttft_objectives_s=tuple(slo.ttft_s for slo in scheduling.slo.values())),
        profiles={pool.name: scheduling.profile_of(pool.profile_name) for pool in config.pools},
        capacity=CapacityPlan.build(config, capacity.policy, settings.cold_start_s),
        addresses=tuple(worker_addresses(config, capacity.slots)))
    routing_url = f"{control_url.rstrip('/')}/admin/v1/routing" if control_url is not None else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running(setup, transport, poll_interval_s, routing_url,
                           lambda: paths.admin_token_file.read_text().strip(),
                           replicas_url(control_url) if control_url is not None else None) as gateway:
            app.state.gateway = gateway
            yield

    app = FastAPI(title="Shunter gateway", version="0.1.0", lifespan=lifespan)
    for module in (openai, rerank, kserve, requests, health):
        app.include_router(module.router)
    _install_error_handlers(app)
    settings = setup.settings
    app.add_middleware(IdempotencyMiddleware)
    app.add_middleware(BodyLimitMiddleware, authenticate=setup.tenants.authenticate, settings=settings)
    metrics_address = settings.metrics_address
    app.add_middleware(MetricsAccessMiddleware, token=read_metrics_token(settings, paths.config_dir),
                       metrics_port=metrics_address[1] if metrics_address else None)
    observability = load_observability(paths.observability_file)
    access_log = open_access_log(observability.access_log, paths.logs / f"{process_name}.access.jsonl")
    app.add_middleware(RequestContextMiddleware, metrics=setup.metrics,
                       known_models=[m.name for m in config.models], access_log=access_log)
    return app

