"""A batched request (embeddings, rerank): bounded (``max_inputs_per_request`` texts,
``max_request_tokens`` tokens: 400 ``too_many_inputs`` / ``too_many_tokens``), counted off the
event loop, admitted, queued, then run on the worker the scheduler chose, its rows sent through
the transport; the ticket ends with the outcome."""

from __future__ import annotations

import numpy as np
from fastapi import Request as HttpRequest

from gateway.admission import AdmissionAdapter
from gateway.catalog import ModelCatalog
from gateway.errors import InvalidRequestError
from gateway.transport.protocol import Columns, RowCall, Transport
from scheduling.tenants import Tenant
from settings.gateway import GatewaySettings
from settings.stack import ModelSpec


def check_inputs(settings: GatewaySettings, count: int, param: str) -> None:
    """Refuse a request of more texts than ``max_inputs_per_request`` (before they are tokenised)."""
    if count > settings.max_inputs_per_request:
        raise InvalidRequestError(f"at most {settings.max_inputs_per_request} inputs per request; this one has "
                                  f"{count}", param=param, code="too_many_inputs")


def check_request_tokens(settings: GatewaySettings, tokens: int, param: str) -> None:
    """Refuse a request that counts more tokens than ``max_request_tokens``."""
    if tokens > settings.max_request_tokens:
        raise InvalidRequestError(f"at most {settings.max_request_tokens} tokens per request; this one counts "
                                  f"{tokens}", param=param, code="too_many_tokens")


async def text_counts(models: ModelCatalog, model: ModelSpec, texts: list[str]) -> list[int]:
    """Each text's token count with the model's tokenizer, off the event loop when they are long."""
    size_chars = sum(len(t) for t in texts)
    return await models.offload.run(size_chars, models.text_tokenizers[model.name].counts, texts)


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
