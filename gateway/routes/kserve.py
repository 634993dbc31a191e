"""KServe v2 routes (the protocol ``tritonclient.http`` speaks) for the batched models.

Requests are decoded by ``kserve_codec`` (JSON and Triton's binary tensor extension), admitted
and scheduled like every inference, forwarded through the transport to the worker the scheduler
chose with the tenant's priority, and encoded back in the form the client asked for. Decoupled
(streaming) models are served by the OpenAI routes instead.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from gateway.auth import authenticate
from gateway.composition import Gateway, gateway_of
from gateway.context import request_context
from gateway.errors import InvalidRequestError, ModelNotFoundError
from gateway.kserve_codec import decode_request, encode_response
from gateway.openapi import INFERENCE, METADATA, READ, kserve_errors, not_ready
from gateway.responses import JSONResponse
from gateway.routing import version_for
from scheduling.tenants import Tenant
from settings.stack import ModelSpec, WorkloadKind

router = APIRouter(prefix="/v2")
TenantDep = Annotated[Tenant, Depends(authenticate)]
BATCHED_KINDS = {WorkloadKind.EMBEDDING, WorkloadKind.RERANK, WorkloadKind.VISION, WorkloadKind.TABULAR}
HEADER_LENGTH = "inference-header-content-length"


def _resolve(request: Request, tenant: Tenant, name: str, version: str | None,
             kinds: set[WorkloadKind]) -> tuple[Gateway, ModelSpec, int]:
    """The model, and the version serving this request: the one named in the path (it must be
    live), else the one the traffic split picks."""
    gateway = gateway_of(request)
    context = request_context(request)
    context.model = name
    spec = gateway.models.model_for(name, kinds, tenant)
    if version is None:
        return gateway, spec, version_for(gateway.routing, context, tenant, spec.name)
    live = gateway.routing.live_versions().get(spec.name, frozenset())
    if not version.isdigit() or int(version) not in live:
        raise ModelNotFoundError(f"model '{name}' has no version {version} being served", param="version")
    context.model_version = int(version)
    return gateway, spec, int(version)


async def _read_body(request: Request) -> tuple[bytes, int | None]:
    """The body (its size already bounded by ``max_kserve_body_bytes``, gateway/body_limit.py)."""
    if request.headers.get("content-encoding", "identity") not in ("identity", ""):
        raise InvalidRequestError("compressed request bodies are not supported", param="content-encoding")
    body = await request.body()
    header_length = request.headers.get(HEADER_LENGTH)
    if header_length is not None and not header_length.isdigit():
        raise InvalidRequestError("Inference-Header-Content-Length must be an integer")
    return body, int(header_length) if header_length is not None else None


async def _infer(request: Request, tenant: Tenant, name: str, version: str | None) -> Response:
    gateway, spec, served_version = _resolve(request, tenant, name, version, BATCHED_KINDS)
    body, header_length = await _read_body(request)
    decoded = decode_request(body, header_length)
    first = decoded.inputs[0].array if decoded.inputs else None
    rows = int(first.shape[0]) if first is not None and first.ndim and spec.batching.max_batch_size else 1
    ticket = await gateway.admission.admit(request, tenant, spec, prefill_tokens=0, rows=max(1, rows))
    with ticket.finishing():
        tensors = await gateway.admission.run_with_retries(request, ticket, lambda: gateway.transport.infer_tensors(
            ticket.worker_id, spec.name, served_version, decoded.inputs, decoded.outputs,
            tenant.tier.triton_priority, ticket.request.request_id))
    binary = {t.name for t in tensors if t.name in decoded.binary_outputs
              or (decoded.binary_default and t.name not in decoded.outputs)}
    payload, json_length = encode_response(spec.name, str(served_version), decoded.id, tensors, binary)
    headers = {HEADER_LENGTH: str(json_length)} if json_length is not None else {}
    media = "application/octet-stream" if json_length is not None else "application/json"
    return Response(payload, media_type=media, headers=headers)


@router.post("/models/{name}/infer", responses=kserve_errors(*INFERENCE))
async def infer(name: str, request: Request, tenant: TenantDep) -> Response:
    return await _infer(request, tenant, name, None)


@router.post("/models/{name}/versions/{version}/infer", responses=kserve_errors(*INFERENCE))
async def infer_version(name: str, version: str, request: Request, tenant: TenantDep) -> Response:
    return await _infer(request, tenant, name, version)


async def _metadata(request: Request, tenant: Tenant, name: str, version: str | None) -> Any:
    gateway, spec, served_version = _resolve(request, tenant, name, version, set())
    meta = await gateway.transport.model_metadata(spec.name, served_version, tenant.allowed_regions)

    def tensors(key: str) -> list[dict[str, Any]]:
        return [{"name": t["name"], "datatype": t["datatype"], "shape": [int(d) for d in t["shape"]]}
                for t in meta.get(key, [])]
    live = sorted(gateway.routing.live_versions().get(spec.name, {served_version}))
    return JSONResponse({"name": spec.name, "versions": [str(v) for v in live], "platform": meta.get("platform", ""),
                           "inputs": tensors("inputs"), "outputs": tensors("outputs")})


@router.get("/models/{name}", responses=kserve_errors(*METADATA))
async def model_metadata(name: str, request: Request, tenant: TenantDep) -> Any:
    return await _metadata(request, tenant, name, None)


@router.get("/models/{name}/versions/{version}", responses=kserve_errors(*METADATA))
async def model_version_metadata(name: str, version: str, request: Request, tenant: TenantDep) -> Any:
    return await _metadata(request, tenant, name, version)


@router.get("/models/{name}/ready", responses={**kserve_errors(*READ, 403, 404, 422), **not_ready()})
async def model_ready(name: str, request: Request, tenant: TenantDep) -> Response:
    gateway, spec, _ = _resolve(request, tenant, name, None, set())
    # a model that may scale to zero takes requests at zero too (they are held for its cold start)
    ready = spec.name in gateway.transport.ready_models() or spec.name in gateway.capacity.scale_to_zero
    return JSONResponse({"name": spec.name, "ready": ready}, status_code=200 if ready else 400)
