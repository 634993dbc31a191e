"""Predicted time to first output of a request on an endpoint, from its observed speed.

The work ahead of the request on that worker is what is already in flight for the model (its
tokens, or its rows times the cost factor) plus the request's own prompt; dividing by the
worker's observed tokens/s gives the estimate the latency scorer and the SLO filter use. For an LLM the prompt is
prefilled at the profile's prefill speed scaled by how the worker's observed speed compares with
the profile's decode speed (a worker measured at half its prior prefills at half speed too).
"""

from __future__ import annotations

from scheduling.placement.endpoint import Endpoint
from scheduling.requests import Request, RequestKind


def predicted_latency_s(request: Request, endpoint: Endpoint) -> float:
    load = endpoint.load.model(request.model)
    if request.kind is RequestKind.LLM:
        ahead = load.tokens / max(1, load.requests) if load.requests else 0.0
        work = ahead + request.prefill_tokens + 1
        profile = endpoint.view.profile
        speed = profile.prefill_tokens_per_s * endpoint.tokens_per_s / profile.decode_tokens_per_s
    else:
        work = (load.rows + request.rows) * request.cost_factor
        speed = endpoint.tokens_per_s
    return work / speed if speed > 0 else float("inf")
