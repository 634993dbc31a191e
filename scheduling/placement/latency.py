"""Predicted time to first output of a request on an endpoint.

LLM (continuous batching): the engine prefills prompts in the order they were dispatched, in steps
that also decode one token for each sequence already running. A prompt dispatched now therefore
waits for the prompts still ahead of it on that worker (``prefill_backlog_s``, tracked by the
scheduler as it dispatches) and then takes its own tokens plus one per running sequence
(``prefill_work_tokens``) at what a prompt costs that engine, learned from its first tokens around
the profile's prefill speed (``scheduling.prefill_cost``); its own tokens are those the engine must
compute, less a prefix it holds (``uncached_prompt_tokens``, ``scheduling.prefix_reuse``). The
worker's observed aggregate speed is deliberately not used: it grows with the batch, so it would
make a busy worker look faster and draw yet more work to it.
Batched models: the rows in flight plus the request's, at the worker's observed speed.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.placement.endpoint import Endpoint
from scheduling.requests import Request, RequestKind
from scheduling.workers import ModelLoad, prefill_backlog_s


def uncached_prompt_tokens(request: Request, endpoint: Endpoint) -> int:
    """Prompt tokens of ``request`` the endpoint's engine must prefill: all of them, less the prefix
    its slots hold when the model's engine reuses prefixes."""
    if not endpoint.limits.prefix_reuse:
        return request.prefill_tokens
    memory = endpoint.load.model(request.model).prefix_memory(request.model_version)
    return request.prefill_tokens - memory.reusable_tokens(request.prefixes, request.prefill_tokens)


def least_uncached_prompt_tokens(request: Request, endpoints: Sequence[Endpoint]) -> int:
    """``uncached_prompt_tokens`` on the endpoint holding most of the prompt (all of it: none)."""
    return min((uncached_prompt_tokens(request, e) for e in endpoints), default=request.prefill_tokens)


def prefill_work_tokens(request: Request, endpoint: Endpoint, load: ModelLoad | None = None) -> float:
    """The work of ``request``'s prompt on the endpoint: the tokens its engine must compute, plus
    one for each sequence it decodes meanwhile (``load``: the endpoint's load of the model)."""
    in_flight = (load or endpoint.load.model(request.model)).requests
    return uncached_prompt_tokens(request, endpoint) + in_flight + 1.0


def prefill_work_and_time(request: Request, endpoint: Endpoint) -> tuple[float, float]:
    """``prefill_work_tokens`` of ``request`` on the endpoint, and the seconds its engine needs for
    them once the prompt is at the head of the line (``scheduling.prefill_cost``)."""
    load = endpoint.load.model(request.model)
    work_tokens = prefill_work_tokens(request, endpoint, load)
    return work_tokens, load.prefill_coefficients(endpoint.view.profile).seconds(work_tokens)


def prefill_time_s(request: Request, endpoint: Endpoint) -> float:
    """Seconds the engine needs for ``request``'s own prompt once it is at the head of the line."""
    return prefill_work_and_time(request, endpoint)[1]


def predicted_latency_s(request: Request, endpoint: Endpoint) -> float:
    load = endpoint.load.model(request.model)
    if request.kind is RequestKind.LLM:
        return prefill_backlog_s(load, endpoint.now_s) + prefill_time_s(request, endpoint)
    work = (load.rows + request.rows) * request.cost_factor
    speed = endpoint.tokens_per_s
    return work / speed if speed > 0 else float("inf")


def ttft_left_s(request: Request, endpoint: Endpoint) -> float | None:
    """What is left of the request's TTFT objective at the snapshot's time (None: no objective)."""
    if request.ttft_slo_s is None:
        return None
    return request.ttft_slo_s - max(0.0, endpoint.now_s - request.arrival_s)
