"""The one object the scheduler, admission and placement ask what will happen to a request.

Questions (``now`` is the endpoint snapshot's ``now_s``; nothing here reads a clock):

    start_wait(request, endpoints)               -> WaitEstimate   admission: its wait behind the queue
    start_wait_behind(request, ahead, endpoints) -> WaitEstimate   a queued request's status
    work_ahead(request)                          -> Work           what the queue serves before it
    first_output_s(request, endpoint)            -> seconds        placement, TTFT expiry
    prefill(request, endpoint)                   -> PrefillPrediction  dispatch: its prompt's work and time
    uncached_prompt_tokens(request, endpoint)    -> tokens         what the engine's prefix cache leaves
    line_fits(request, endpoint)                 -> bool           dispatch budget: the engine's line bound
    expected_units(request), output_share(limits)                  what a request is expected to cost

What happened, taken in as the scheduler learns it:

    queued(request, endpoints) / dequeued(request_id)
    dispatched(request, endpoint)       the engine's slot now holds the prompt (prefix reuse)
    first_token(load, request_id, now)  corrects the engine's line, learns what the prompt cost
    completed(request, generated_tokens)  learns the share of ``max_tokens`` generated

What an engine has been sent lives in that worker's ``workers.ModelLoad`` (its line, its prompt
cost, its prefix memory), so the answers about an endpoint read only the endpoint; the predictor
itself holds the work queued in the gateway and the output requests generate. A placement built
without the scheduler's predictor (a test's) asks a fresh one: its answers about an endpoint are
the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduling.endpoint import Endpoint
from scheduling.prediction.latency import (
    least_uncached_prompt_tokens,
    line_fits,
    predicted_latency_s,
    prefill_work_and_time,
    uncached_prompt_tokens,
)
from scheduling.prediction.queued_work import NO_WORK, QueuedWork, Work
from scheduling.prediction.start_wait import WaitEstimate, wait_estimate
from scheduling.requests import Request, RequestKind
from scheduling.workers import ModelLimits, ModelLoad, held_output_share

OUTPUT_RATIO_SMOOTHING = 0.2


@dataclass(frozen=True)
class PrefillPrediction:
    """A prompt on one engine: its work (tokens the engine computes, plus one per sequence it
    decodes meanwhile) and the seconds that takes once the prompt is at the head of the line."""

    work_tokens: float = 0.0
    seconds: float = 0.0


NO_PREFILL = PrefillPrediction()


class Predictor:
    """See the module docstring. ``fair``: the queue serves a tier's tenants by fair share
    (``queued_work.QueuedWork``); otherwise the whole tier's backlog is ahead of a request."""

    def __init__(self, fair: bool = True) -> None:
        self.queued_work = QueuedWork(fair=fair)
        self._output_ratio: dict[str, float] = {}  # model -> smoothed share of max_tokens generated

    # -- what a request is expected to cost ------------------------------------------------------
    def expected_units(self, request: Request) -> float:
        """Cost tokens ``request`` is expected to take: its prompt plus the output it is expected
        to generate (rows for a model without tokens), times its cost factor."""
        ratio = self._output_ratio.get(request.model, 1.0)
        units = request.prefill_tokens + request.max_output_tokens * ratio
        return (units or request.rows) * request.cost_factor

    def output_share(self, limits: ModelLimits) -> float:
        """Share of an LLM request's reserved output that its KV claim counts: all of it, or for an
        engine that allocates KV on demand what a sequence holds on average given the observed
        (smoothed) share of ``max_tokens`` generated (``workers.held_output_share``)."""
        return held_output_share(self._output_ratio.get(limits.name, 1.0)) if limits.kv_on_demand else 1.0

    # -- waits -----------------------------------------------------------------------------------
    def work_ahead(self, request: Request) -> Work:
        """The queued work served before ``request`` (not yet queued; ``QueuedWork.ahead_of``)."""
        return self.queued_work.ahead_of(request, self.expected_units(request))

    def start_wait(self, request: Request, endpoints: Sequence[Endpoint]) -> WaitEstimate:
        """The wait of ``request`` behind the work the queue serves first, on the feasible
        ``endpoints``: for an LLM until it can start, for a batched model until the work ahead is
        done (``start_wait``)."""
        return wait_estimate(request, self.work_ahead(request), self.expected_units(request), endpoints)

    def start_wait_behind(self, request: Request, ahead: Iterable[Request],
                          endpoints: Sequence[Endpoint]) -> WaitEstimate:
        """The wait of ``request`` behind the requests ``ahead`` (each at its expected cost, its
        prompt as the endpoint holding most of it would prefill it)."""
        work = NO_WORK
        for queued in ahead:
            work = work + Work.of(queued, self.expected_units(queued), least_uncached_prompt_tokens(queued, endpoints))
        return wait_estimate(request, work, self.expected_units(request), endpoints)

    # -- one request on one endpoint ---------------------------------------------------------------
    def first_output_s(self, request: Request, endpoint: Endpoint) -> float:
        """Seconds from the endpoint's snapshot to ``request``'s first output if dispatched there
        then (``latency``)."""
        return predicted_latency_s(request, endpoint)

    def prefill(self, request: Request, endpoint: Endpoint) -> PrefillPrediction:
        """``request``'s prompt on the endpoint's engine (none for a batched request)."""
        if request.kind is not RequestKind.LLM:
            return NO_PREFILL
        work_tokens, seconds = prefill_work_and_time(request, endpoint)
        return PrefillPrediction(work_tokens, seconds)

    def uncached_prompt_tokens(self, request: Request, endpoint: Endpoint) -> int:
        """Prompt tokens the endpoint's engine must compute: less the prefix its slots hold."""
        return uncached_prompt_tokens(request, endpoint)

    def line_fits(self, request: Request, endpoint: Endpoint) -> bool:
        """The engine's predicted line is within the model's bound (``latency.line_fits``)."""
        return line_fits(request, endpoint)

    # -- what happened ---------------------------------------------------------------------------
    def queued(self, request: Request, endpoints: Sequence[Endpoint]) -> None:
        """``request`` joined the queue: its work is ahead of later ones, its prompt counted as the
        feasible endpoint holding most of it would prefill it."""
        prompt_tokens = least_uncached_prompt_tokens(request, endpoints)
        self.queued_work.add(request, self.expected_units(request), prompt_tokens)

    def dequeued(self, request_id: str) -> None:
        """The request left the queue (dispatched, expired, shed or cancelled)."""
        self.queued_work.remove(request_id)

    def dispatched(self, request: Request, endpoint: Endpoint) -> None:
        """``request`` was sent to the endpoint: the engine slot that takes it holds its prompt."""
        if endpoint.limits.prefix_reuse:
            slots = endpoint.view.profile.max_sequences
            endpoint.load.model(request.model).prefix_memory(request.model_version).remember(request.prefixes, slots)

    def first_token(self, load: ModelLoad, request_id: str, now: float) -> None:
        """A prompt's first token on the engine of ``load``: corrects its line
        (``prefill_line.PrefillLine``), and teaches its prompt cost what it took (``prefill_cost``)."""
        sample = load.line.first_token(request_id, now)
        if sample is not None:
            load.prefill.observe(sample.work_tokens, sample.seconds)

    def completed(self, request: Request, generated_tokens: int) -> None:
        """``request`` ended after ``generated_tokens``: learn the share of ``max_tokens`` generated."""
        if request.max_output_tokens:
            ratio = min(1.0, generated_tokens / request.max_output_tokens)
            old = self._output_ratio.get(request.model, 1.0)
            self._output_ratio[request.model] = old + OUTPUT_RATIO_SMOOTHING * (ratio - old)
