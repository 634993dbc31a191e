"""A batched request (embeddings, rerank): admitted, queued, then run on the worker the scheduler
chose, its rows sent through the transport; the ticket ends with the outcome."""

from __future__ import annotations

import numpy as np
from fastapi import Request as HttpRequest

from gateway.admission import AdmissionAdapter
from gateway.transport.protocol import Columns, RowCall, Transport
from scheduling.tenants import Tenant
from settings.stack import ModelSpec


def text_rows(texts: list[str]) -> np.ndarray:
    """A BYTES column [rows, 1] of UTF-8 strings."""
    return np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)


async def run_batched(admission: AdmissionAdapter, transport: Transport, http_request: HttpRequest, tenant: Tenant,
                      model: ModelSpec, columns: Columns, outputs: list[str], prefill_tokens: int = 0) -> Columns:
    """Admit one batched request, wait for its turn, run it (again on another worker, or the
    restarted one, when its worker fails: ``run_with_retries``) and end its ticket with the outcome."""
    rows = len(next(iter(columns.values())))
    ticket = await admission.admit(http_request, tenant, model, prefill_tokens, rows=rows)
    request = ticket.request

    async def run() -> Columns:
        call = RowCall(ticket.worker_id, model.name, request.model_version, tuple(outputs),
                       request.tier.triton_priority, request.request_id, model.batching.max_batch_size,
                       model.instances)
        return await transport.infer_rows(call, columns)

    with ticket.finishing():
        return await admission.run_with_retries(http_request, ticket, run)
