"""When a queued request can start: admission's wait estimate (``WaitEstimate``).

A batched request waits until the work ahead of it is done, at the feasible workers' observed
speed. A queued LLM request does not wait for the work ahead of it to *finish*: an engine runs
many sequences at once. It waits until

- the prompts ahead of it are prefilled: the engines' prefill lines (as predicted at dispatch) plus
  the prompts queued ahead of it (what the engines must compute of them, ``prefix_reuse``, and
  each prompt's fixed cost), at the feasible workers' summed prefill speed (both learned from
  first tokens, ``prefill_cost``). The gateway holds prompts back while an engine's line is long
  (``max_prefill_line_s``), but they are prefilled in that order all the same: the bound changes
  where a prompt waits, not how long;
- and there is room for it: when the KV claims (``workers.kv_claim_tokens``) or the sequences in
  flight, plus those queued ahead, plus its own exceed the workers' budget for its tier, the excess
  must complete first. That work drains at the workers' observed service speed.

The predicted wait is the longer of the two (``tokens_ahead`` over ``service_tokens_per_s`` for
the first, ``capacity_wait_s`` for the second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.endpoint import Endpoint
from scheduling.prediction.latency import prefill_backlog_s, uncached_prompt_tokens
from scheduling.prediction.queued_work import Work
from scheduling.requests import Request, RequestKind
from scheduling.workers import kv_capacity_tokens, kv_claim_tokens


@dataclass(frozen=True)
class WaitEstimate:
    """The predicted wait of one request: backlog ahead of it, the speed that drains it, and the
    least time the request itself takes to its first output once started (``service_s``).

    For an LLM the backlog is the prompt tokens to prefill before its own, at prefill speed, and
    ``capacity_wait_s`` the time until there is room for it in the engines' budget; the predicted
    wait is the longer of the two (module docstring).
    """

    tokens_ahead: float
    service_tokens_per_s: float
    service_s: float = 0.0
    capacity_wait_s: float = 0.0

    @property
    def predicted_wait_s(self) -> float:
        line_s = self.tokens_ahead / self.service_tokens_per_s if self.service_tokens_per_s > 0 else float("inf")
        return max(line_s, self.capacity_wait_s)


def wait_estimate(request: Request, ahead: Work, own_units: float, endpoints: Sequence[Endpoint]) -> WaitEstimate:
    """The wait of ``request`` (expected cost ``own_units``) behind ``ahead`` on ``endpoints``."""
    if request.kind is RequestKind.LLM and endpoints:
        return _llm_wait_estimate(request, ahead, own_units, endpoints)
    return WaitEstimate(ahead.units, sum(e.tokens_per_s for e in endpoints))


def _llm_wait_estimate(request: Request, ahead: Work, own_units: float,
                       endpoints: Sequence[Endpoint]) -> WaitEstimate:
    """The wait of LLM ``request`` (expected cost ``own_units``) behind ``ahead`` on ``endpoints``
    (not empty), and its own prefill time on the fastest of them when idle."""
    loads = [e.load.model(request.model) for e in endpoints]
    costs = [load.prefill_coefficients(e.view.profile) for e, load in zip(endpoints, loads, strict=True)]
    speeds = [cost.tokens_per_s for cost in costs]
    line_tokens = sum(prefill_backlog_s(load, e.now_s) * speed
                      for e, load, speed in zip(endpoints, loads, speeds, strict=True))
    overhead_tokens = sum(cost.overhead_s * cost.tokens_per_s for cost in costs) / len(costs)
    service_s = min(cost.seconds(uncached_prompt_tokens(request, e) + 1.0)
                    for e, cost in zip(endpoints, costs, strict=True))
    return WaitEstimate(line_tokens + ahead.prefill_tokens + ahead.requests * overhead_tokens, sum(speeds),
                        service_s, capacity_wait_s(request, ahead, own_units, endpoints))


def capacity_wait_s(request: Request, ahead: Work, own_units: float, endpoints: Sequence[Endpoint]) -> float:
    """Seconds until some worker has room for ``request`` within its tier's KV and sequence budget,
    the work queued ahead taking its part of every worker (in proportion to the worker's speed);
    0 when it fits at once. Dispatch is per worker, so the first worker to make room decides."""
    rate = sum(e.tokens_per_s for e in endpoints)
    if rate <= 0:
        return float("inf")
    units_per_request = (ahead.units + own_units) / (ahead.requests + 1.0)
    return min(_worker_wait_s(request, ahead.scaled(e.tokens_per_s / rate), e, own_units, units_per_request)
               for e in endpoints)


def _worker_wait_s(request: Request, ahead: Work, endpoint: Endpoint, own_units: float,
                   units_per_request: float) -> float:
    """Seconds until the work on ``endpoint`` over the tier's budget (with ``ahead`` and the request
    added, each by its KV claim there) has completed, at the worker's observed speed."""
    view, share = endpoint.view, endpoint.limits.share(request.tier)
    own_kv = kv_claim_tokens(request, endpoint.output_share)
    units_per_kv_token = own_units / own_kv if own_kv else 1.0
    ahead_kv = ahead.prefill_tokens + (ahead.kv_tokens - ahead.prefill_tokens) * endpoint.output_share
    kv_in_flight = max(endpoint.load.kv_tokens, view.kv_used_tokens or 0) + ahead_kv
    sequences = endpoint.load.model(request.model).requests + ahead.requests
    # What must finish cannot exceed what is there: a request larger than the budget runs alone.
    kv_excess = min(kv_in_flight, kv_in_flight + own_kv - kv_capacity_tokens(view) * share)
    sequence_excess = min(sequences, sequences + 1 - max(1, int(view.profile.max_sequences * share)))
    excess_units = max(kv_excess * units_per_kv_token, sequence_excess * units_per_request, 0.0)
    if excess_units <= 0:
        return 0.0
    return excess_units / endpoint.tokens_per_s if endpoint.tokens_per_s > 0 else float("inf")
