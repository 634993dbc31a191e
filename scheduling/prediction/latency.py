"""Predicted time to first output of a request on an endpoint, and the bound on an engine's line.

LLM (continuous batching): the engine prefills prompts in the order they were dispatched, in steps
that also decode one token for each sequence already running. A prompt dispatched now therefore
waits for the prompts still ahead of it on that worker (``prefill_backlog_s``, its
``prefill_line.PrefillLine``, tracked as the scheduler dispatches) and then takes its own tokens
plus one per running sequence (``prefill_work_tokens``) at what a prompt costs that engine,
learned from its first tokens around the profile's prefill speed (``prefill_cost``); its own
tokens are those the engine must compute, less a prefix it holds (``uncached_prompt_tokens``,
``prefix_reuse``). The worker's observed aggregate speed is deliberately not used: it grows with
the batch, so it would make a busy worker look faster and draw yet more work to it.
Batched models: the rows in flight plus the request's, at the worker's observed speed.

``line_fits`` is the dispatch budget read from that line: an engine is sent a prompt only while
its predicted line is shorter than the model's bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.endpoint import Endpoint
from scheduling.requests import Request, RequestKind
from scheduling.workers import ModelLoad


def prefill_backlog_s(load: ModelLoad, now: float) -> float:
    """Predicted seconds before a prompt dispatched now starts its prefill (the prompts ahead)."""
    return load.line.backlog_s(now) if load.requests else 0.0


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
    them once the prompt is at the head of the line (``prefill_cost``)."""
    load = endpoint.load.model(request.model)
    work_tokens = prefill_work_tokens(request, endpoint, load)
    return work_tokens, load.prefill_coefficients(endpoint.view.profile).seconds(work_tokens)


def prefill_time_s(request: Request, endpoint: Endpoint) -> float:
    """Seconds the engine needs for ``request``'s own prompt once it is at the head of the line."""
    return prefill_work_and_time(request, endpoint)[1]


def predicted_latency_s(request: Request, endpoint: Endpoint) -> float:
    """Seconds from the endpoint's snapshot to ``request``'s first output if dispatched there then."""
    load = endpoint.load.model(request.model)
    if request.kind is RequestKind.LLM:
        return prefill_backlog_s(load, endpoint.now_s) + prefill_time_s(request, endpoint)
    work = (load.rows + request.rows) * request.cost_factor
    speed = endpoint.tokens_per_s
    return work / speed if speed > 0 else float("inf")


def line_fits(request: Request, endpoint: Endpoint) -> bool:
    """True when the engine's line of prompts not yet prefilled is shorter than the model's bound
    on this worker (``ModelLimits.prefill_line_bound_s``, times the tier's share), so the backlog
    stays in the gateway's fair queue and a quiet tenant's prompt is not queued inside the engine
    behind a busy tenant's; a worker with nothing in flight always takes a request."""
    limits = endpoint.limits
    if limits.max_prefill_line_s is None or request.kind is not RequestKind.LLM:
        return True
    load = endpoint.load.model(request.model)
    bound = limits.prefill_line_bound_s(load.prefill_coefficients(endpoint.view.profile).tokens_per_s)
    return bound is None or prefill_backlog_s(load, endpoint.now_s) < bound * limits.share(request.tier)
