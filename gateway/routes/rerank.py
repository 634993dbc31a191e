"""``POST /v1/rerank`` in the Cohere/Jina shape: one request expands to query x documents rows."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Request

from gateway.auth import authenticate
from gateway.batched import check_inputs, check_request_tokens, run_batched, text_counts, text_rows
from gateway.composition import gateway_of
from gateway.context import request_context
from gateway.errors import ContextLengthExceededError
from gateway.openapi import INFERENCE, errors
from gateway.responses import JSONResponse
from gateway.schemas import RerankRequest
from scheduling.tenants import Tenant
from settings.stack import WorkloadKind

router = APIRouter(prefix="/v1")


@router.post("/rerank", responses=errors(*INFERENCE))
async def rerank(body: RerankRequest, request: Request,
                 tenant: Annotated[Tenant, Depends(authenticate)]) -> Any:
    gateway = gateway_of(request)
    context = request_context(request)
    context.model = body.model
    model = gateway.models.model_for(body.model, {WorkloadKind.RERANK}, tenant)
    documents = [d if isinstance(d, str) else d.text for d in body.documents]
    check_inputs(gateway.settings, len(documents), "documents")
    counts = await text_counts(gateway.models, model, [body.query, *documents])
    if counts[0] > model.context_tokens:
        raise ContextLengthExceededError(
            f"the query has {counts[0]} tokens; this model takes at most {model.context_tokens}",
            param="query")
    pair_tokens = counts[0] * len(documents) + sum(counts[1:])
    check_request_tokens(gateway.settings, pair_tokens, "documents")
    result = await run_batched(
        gateway.admission, gateway.transport, request, tenant, model,
        {"query": text_rows([body.query] * len(documents)), "document": text_rows(documents)},
        ["score"], prefill_tokens=pair_tokens)
    scores = result["score"].reshape(-1)
    order = np.argsort(-scores, kind="stable")[: body.top_n or len(documents)]
    results: list[dict[str, Any]] = []
    for index in order.tolist():
        entry: dict[str, Any] = {"index": index, "relevance_score": float(scores[index])}
        if body.return_documents:
            entry["document"] = {"text": documents[index]}
        results.append(entry)
    return JSONResponse({"id": context.request_id, "model": body.model,
                           "results": results})
