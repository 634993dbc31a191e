"""The admission adapter: from an HTTP request to the scheduling core's ``Request``, and the wait for
its turn.

``AdmissionAdapter.admit(...)`` builds the core's request (cost in tokens, tier SLO, queue
deadline), takes its share of the tenant's fleet-wide quotas when the gateways share a state store
(``fleet_quotas``), waits in the dispatcher's queue while watching for the client to disconnect,
and returns the ``Ticket`` naming the worker. The queue deadline is the tier's ``deadline_s`` or,
if sooner, the client's ``X-Deadline-Ms`` header (milliseconds it will wait for the request to
start).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from fastapi import Request as HttpRequest
from starlette.types import Receive

from gateway.context import request_context
from gateway.dispatcher import Dispatcher, Ticket
from gateway.errors import InvalidRequestError, WorkerFailedError
from gateway.fleet_quotas import FleetQuotas
from gateway.routing import RoutingTable, version_for
from scheduling.prediction.prefix_reuse import PromptPrefixes
from scheduling.requests import Request, RequestKind
from scheduling.slo import Slo
from scheduling.tenants import Tenant, Tier
from settings.stack import ModelSpec, WorkloadKind

T = TypeVar("T")
DEADLINE_HEADER = "x-deadline-ms"
_MAX_MESSAGES = 1000


def queue_deadline_s(http_request: HttpRequest, tier_deadline_s: float, now: float) -> float:
    header = http_request.headers.get(DEADLINE_HEADER)
    if header is None:
        return now + tier_deadline_s
    if not header.isdigit() or not 0 < int(header) <= 86_400_000:
        raise InvalidRequestError("X-Deadline-Ms must be an integer number of milliseconds, 1 to 86400000",
                                  param="X-Deadline-Ms")
    return now + min(tier_deadline_s, int(header) / 1000)


async def client_gone(receive: Receive) -> None:
    """Complete when the client disconnects (the body has been read, so only that can arrive)."""
    for _ in range(_MAX_MESSAGES):
        message = await receive()
        if message["type"] == "http.disconnect":
            return
    raise RuntimeError("unexpected messages after the request body")


class AdmissionAdapter:
    """Admits HTTP requests into the dispatcher with their tier's SLO and the routed version."""

    def __init__(self, dispatcher: Dispatcher, slo: Mapping[Tier, Slo], routing: RoutingTable,
                 fleet_quotas: FleetQuotas | None = None, max_attempts: int = 3) -> None:
        self.dispatcher = dispatcher
        self.slo = slo
        self.routing = routing
        self.fleet_quotas = fleet_quotas
        self.max_attempts = max_attempts  # runs of one request on workers that fail (settings: worker_attempts)

    async def run_with_retries(self, http_request: HttpRequest, ticket: Ticket, run: Callable[[], Awaitable[T]]) -> T:
        """``run()`` (a call on ``ticket.worker_id`` that produces nothing before it returns); when
        its worker fails (``WorkerFailedError``), the request is dispatched again and ``run()``
        called again, at most ``max_attempts`` times in all; then the last failure is raised."""
        while True:
            try:
                return await run()
            except WorkerFailedError:
                if ticket.attempts >= self.max_attempts:
                    raise
                await self.dispatcher.redispatch(ticket, lambda: client_gone(http_request.receive))

    async def admit(self, http_request: HttpRequest, tenant: Tenant, model: ModelSpec, prefill_tokens: int,
                    max_output_tokens: int = 0, rows: int = 1, prefixes: PromptPrefixes | None = None) -> Ticket:
        """Admission and the queue wait for one request; raises the taxonomy's error on rejection,
        expiry or shedding, ``ClientClosedError`` when the client leaves while queued. ``prefixes``:
        an LLM prompt's block hashes (``scheduling.prediction.prefix_reuse``)."""
        context = request_context(http_request)
        now = self.dispatcher.clock()
        slo = self.slo[tenant.tier]
        llm = model.kind is WorkloadKind.LLM
        request = Request(
            request_id=context.request_id, tenant=tenant, model=model.name,
            kind=RequestKind.LLM if llm else RequestKind.BATCHED, arrival_s=now,
            deadline_s=queue_deadline_s(http_request, slo.deadline_s, now),
            prefill_tokens=prefill_tokens, max_output_tokens=max_output_tokens if llm else 0, rows=rows,
            cost_factor=model.token_cost_factor, ttft_slo_s=slo.ttft_s,
            model_version=version_for(self.routing, context, tenant, model.name), prefixes=prefixes,
        )
        if self.fleet_quotas is not None:
            await self.fleet_quotas.take(request)  # given back by the dispatcher's ending of the request
        ticket = await self.dispatcher.acquire(request, lambda: client_gone(http_request.receive))
        context.dispatch, context.ticket, context.tokens_in = ticket.dispatch, ticket, prefill_tokens
        return ticket
