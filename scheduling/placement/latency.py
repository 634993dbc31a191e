"""Predicted time to first output of a request on an endpoint.

LLM (continuous batching): the request's prompt is prefilled in steps that also decode one token
for each sequence already running, so the work before its first token is its prompt plus one
token per running sequence, at the profile's prefill speed scaled down by how the worker's
observed speed compares with its profile (never up: a busy worker's aggregate speed rises with
its batch, which must not make it look faster to the next request). Batched models: the rows in
flight plus the request's, at the worker's observed speed.
"""

from __future__ import annotations

from scheduling.placement.endpoint import Endpoint
from scheduling.requests import Request, RequestKind


def predicted_latency_s(request: Request, endpoint: Endpoint) -> float:
    load = endpoint.load.model(request.model)
    if request.kind is RequestKind.LLM:
        profile = endpoint.view.profile
        work = request.prefill_tokens + load.requests + 1.0
        speed = profile.prefill_tokens_per_s * min(1.0, endpoint.tokens_per_s / profile.decode_tokens_per_s)
    else:
        work = (load.rows + request.rows) * request.cost_factor
        speed = endpoint.tokens_per_s
    return work / speed if speed > 0 else float("inf")
