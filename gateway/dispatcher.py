"""The asyncio driver of the scheduling core.

A handler calls ``acquire(request, client_gone)``: the request is admitted or rejected at once
(the rejection raised as the taxonomy's error), then waits in the core's queue until the one
driver task releases it to a worker (a ``Ticket``), its deadline passes (504, never sent to a
worker), it is shed (429), or the awaitable that ``client_gone()`` makes completes (the client
disconnected: it leaves the queue at once). The handler ends the ticket exactly once, with
``finish(ending, generated_tokens)`` or ``finishing()``; that frees the worker's budget and wakes
the driver. The ticket names the worker by id; the handler calls it through the ``Transport``.

A model that may scale to zero (``cold_starts``: the core's ``ColdStart`` per such model, asked on
every worker refresh) holds its requests while no worker is ready for it: their status reads
``waiting_for_capacity``, a deadline that comes first gives 504 ``model_cold`` (with
``Retry-After``: the predicted ready time), and one before the predicted ready time is refused
503 ``model_cold`` at admission. ``signals`` counts arrivals for the capacity controller and
publishes its gauges when ``/metrics`` is read (``gateway/capacity.py``).

When that worker fails (crashes, becomes unreachable) before the request finished, the handler
may ``redispatch(ticket)``: the request goes back to the queue with its admission kept
(``Scheduler.requeue``), waits again at most its original queue allowance (its deadline minus its
arrival), and the ticket then names the new worker (or the request ends as it would have in the
queue: 504, client gone). Each attempt is counted in the request's status (``attempts``); the
outcome is still recorded once.

Each admission runs a scheduling pass at once; the driver task runs one on every finish and
worker update, and otherwise at the earliest queued deadline, so expiry is late by no more than
the event loop's latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gateway.capacity import CapacitySignals
from gateway.errors import (
    ClientClosedError,
    DeadlineExceededError,
    GatewayError,
    UnavailableError,
    WorkerFailedError,
    rejection_error,
)
from gateway.metrics import GatewayMetrics
from gateway.outcomes import CANCELLED, COMPLETED, INTERNAL_FAILURE, Ending
from gateway.request_status import RequestStatusStore
from gateway.transport.protocol import Transport
from scheduling.fair_queue import TIERS_IN_ORDER
from scheduling.holding import ColdStart
from scheduling.outcomes import Admitted, Dispatch, Expired, Rejected, SchedulePlan
from scheduling.requests import Request
from scheduling.scheduler import Scheduler
from scheduling.workers import WorkerView

log = logging.getLogger(__name__)
MAX_IDLE_S = 1.0
DEPTH_INTERVAL_S = 0.5


@dataclass
class Ticket:
    """A request released to a worker (``dispatch.worker_id``); ``finish`` it exactly once (later
    calls do nothing)."""

    request: Request
    dispatch: Dispatch
    _dispatcher: Dispatcher = field(repr=False)
    _finished: bool = False
    _first_output_seen: bool = False
    attempts: int = 1  # dispatches so far (``Dispatcher.redispatch`` adds one)
    generated_tokens: int = 0  # output tokens, as given to ``finish``

    @property
    def finished(self) -> bool:
        return self._finished

    def first_output(self) -> None:
        """The worker sent the request's first output (its prompt is prefilled); later calls do nothing."""
        if not self._first_output_seen and not self._finished:
            self._first_output_seen = True
            self._dispatcher.first_output(self.request)

    @property
    def worker_id(self) -> str:
        return self.dispatch.worker_id

    def finish(self, ending: Ending, generated_tokens: int = 0) -> None:
        if not self._finished:
            self._finished = True
            self.generated_tokens = generated_tokens
            self._dispatcher.finish(self.request, ending, generated_tokens)

    @contextlib.contextmanager
    def finishing(self) -> Iterator[None]:
        """Finish the ticket with the block's ending: completed, the error's, cancelled, or
        ``failed(internal_error)`` for anything unexpected."""
        try:
            yield
        except GatewayError as exc:
            self.finish(exc.ending)
            raise
        except asyncio.CancelledError:
            self.finish(CANCELLED)
            raise
        except BaseException:
            self.finish(INTERNAL_FAILURE)
            raise
        self.finish(COMPLETED)


class Dispatcher:
    def __init__(self, scheduler: Scheduler, transport: Transport, metrics: GatewayMetrics,
                 statuses: RequestStatusStore, views: Callable[[], list[WorkerView]],
                 clock: Callable[[], float] = time.monotonic,
                 cold_starts: Callable[[float], list[ColdStart]] | None = None,
                 signals: CapacitySignals | None = None) -> None:
        self.scheduler = scheduler
        self.transport = transport
        self.metrics = metrics
        self.statuses = statuses
        self._views = views
        self.clock = clock
        self._cold_starts = cold_starts
        self.signals = signals
        self._waiting: dict[str, asyncio.Future[Dispatch]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._depth_updated_s = float("-inf")
        self._driver_wakes_s = float("-inf")
        self.on_ended: list[Callable[[Request, int], None]] = []  # (request, generated tokens), once each

    async def start(self) -> None:
        self.refresh_workers()
        self._task = asyncio.create_task(self._run(), name="scheduler-driver")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(UnavailableError("the gateway is shutting down", retry_after_s=5))
        await self.statuses.close()

    def refresh_workers(self) -> None:
        """Give the core the workers' current views (readiness, live KV) and wake the driver."""
        views = self._views()
        self.scheduler.update_workers(views)
        if self._cold_starts is not None:
            self.scheduler.update_cold_starts(self._cold_starts(self.clock()))
        for view in views:
            if view.kv_total_tokens is not None:
                self.metrics.worker_kv_tokens.labels(view.worker_id, "total").set(view.kv_total_tokens)
                self.metrics.worker_kv_tokens.labels(view.worker_id, "used").set(view.kv_used_tokens or 0)
        for (worker_id, model), cost in self.scheduler.prefill_costs().items():
            self.metrics.worker_prefill_tokens_per_s.labels(worker_id, model).set(cost.tokens_per_s)
            self.metrics.worker_prefill_overhead_s.labels(worker_id, model).set(cost.overhead_s)
        self._wake.set()

    async def acquire(self, request: Request,
                      client_gone: Callable[[], Awaitable[object]] | None = None) -> Ticket:
        """Wait for ``request``'s turn; see the module docstring."""
        self.statuses.queued(request)
        self.metrics.version_holders.labels(request.model, str(request.model_version)).inc()
        if self.signals is not None:
            self.signals.arrived(request)
        decision = self.scheduler.submit(request, self.clock())
        if isinstance(decision, Rejected):
            raise self._rejected(request, decision)
        if isinstance(decision, Admitted) and decision.held:
            self.statuses.waiting_for_capacity(request.request_id)
        dispatch = await self._await_dispatch(request, client_gone)
        self.metrics.queue_wait_s.labels(request.model, request.tier.value, dispatch.pool).observe(
            dispatch.queue_wait_s)
        return Ticket(request, dispatch, self)

    async def redispatch(self, ticket: Ticket, client_gone: Callable[[], Awaitable[object]] | None = None) -> None:
        """The ticket's worker failed before the request finished: queue it again and wait for its
        next worker (see the module docstring). Raises as ``acquire`` does once it cannot run
        again (the ticket then counts as finished); ``RuntimeError`` for a finished ticket."""
        request = ticket.request
        if ticket.finished:
            raise RuntimeError(f"request {request.request_id} has already ended")
        now = self.clock()
        if not self.scheduler.requeue(request.request_id, now, now + (request.deadline_s - request.arrival_s)):
            ticket.finish(WorkerFailedError("the worker serving the request failed").ending)  # not in flight
            raise WorkerFailedError("the worker serving the request failed and it cannot be sent again")
        self.metrics.in_flight.labels(request.model).dec()
        ticket.attempts += 1
        self.statuses.retrying(request.request_id, ticket.attempts)
        self.metrics.retries.labels(request.model).inc()
        try:
            ticket.dispatch = await self._await_dispatch(request, client_gone, queued=True, after_failure=True)
        except BaseException:
            ticket._finished = True  # ended by _await_dispatch (outcome recorded once, there)
            raise
        ticket._first_output_seen = False

    async def _await_dispatch(self, request: Request, client_gone: Callable[[], Awaitable[object]] | None,
                              queued: bool = False, after_failure: bool = False) -> Dispatch:
        """Wait until the driver releases the admitted (or requeued) request to a worker; on any
        other end (expired, shed, client gone, worker gone) record its outcome and raise. A request
        queued again ``after_failure`` of its worker that expires ends as ``worker_failed``: that
        failure, not the queue, is what the client must hear about."""
        future: asyncio.Future[Dispatch] = asyncio.get_running_loop().create_future()
        self._waiting[request.request_id] = future
        self._schedule_now()
        if queued or request.deadline_s < self._driver_wakes_s:
            self._wake.set()  # the driver may sleep past this deadline: let it re-plan its sleep
        # Most requests are dispatched by the pass above: no disconnect watcher task for those.
        watcher = asyncio.ensure_future(client_gone()) if client_gone is not None and not future.done() else None
        try:
            if watcher is not None:
                racing: set[asyncio.Future[Any]] = {future, watcher}
                await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            dispatch = await future if future.done() or watcher is None else None
        except GatewayError as exc:  # expired or shed while queued
            if after_failure and isinstance(exc, DeadlineExceededError):
                exc = WorkerFailedError("the worker serving the request failed and no other worker could take it "
                                        "before its deadline")
            self._ended(request, exc.ending)
            raise exc from None
        except BaseException:
            self._abandon(request, future)
            raise
        finally:
            self._waiting.pop(request.request_id, None)
            if watcher is not None:
                watcher.cancel()
        if dispatch is None:
            self._abandon(request, future)
            raise ClientClosedError("the client closed the connection while the request was queued")
        if not self.transport.has_worker(dispatch.worker_id):
            raise self._worker_gone(request, dispatch.worker_id)
        self.statuses.dispatched(dispatch, dispatch.worker_id)
        self.metrics.in_flight.labels(request.model).inc()
        return dispatch

    def _abandon(self, request: Request, future: asyncio.Future[Dispatch]) -> None:
        """The waiter left (disconnect, cancellation): take it out of the queue or off its worker."""
        if future.done() and not future.cancelled() and future.exception() is None:
            self.scheduler.complete(request.request_id, self.clock())
        else:
            future.cancel()
            self.scheduler.cancel(request.request_id, self.clock())
        self._ended(request, CANCELLED)
        self._wake.set()

    def _worker_gone(self, request: Request, worker_id: str) -> GatewayError:
        """The worker the core chose left the configuration before the request reached it."""
        error = UnavailableError(f"worker {worker_id} is gone", code="worker_gone", retry_after_s=1)
        self.scheduler.complete(request.request_id, self.clock())
        self._ended(request, error.ending)
        self._wake.set()
        return error

    def _rejected(self, request: Request, rejected: Rejected) -> GatewayError:
        error = rejection_error(rejected)
        self.metrics.rejections.labels(request.tier.value, rejected.reason.value).inc()
        self._ended(request, error.ending)
        return error

    def _ended(self, request: Request, ending: Ending, generated_tokens: int = 0) -> None:
        self.metrics.version_holders.labels(request.model, str(request.model_version)).dec()
        self.statuses.finished(request.request_id, ending.label)
        self.metrics.outcomes.labels(request.tier.value, request.model, ending.outcome.value).inc()
        for callback in self.on_ended:
            callback(request, generated_tokens)

    def first_output(self, request: Request) -> None:
        """Tell the core when a dispatched LLM request's first token came, which corrects its
        worker's predicted prefill line (and may let the next prompt go)."""
        self.scheduler.first_token(request.request_id, self.clock())
        self._wake.set()

    def finish(self, request: Request, ending: Ending, generated_tokens: int = 0) -> None:
        self.scheduler.complete(request.request_id, self.clock(), generated_tokens)
        self.metrics.in_flight.labels(request.model).dec()
        self._ended(request, ending, generated_tokens)
        counter = self.scheduler.service_counters().get(request.tenant.name)
        if counter is not None:
            self.metrics.weighted_service.labels(request.tenant.name, request.tier.value).set(counter)
        self._wake.set()

    def _schedule_now(self) -> None:
        """One scheduling pass, applied at once (so the queue holds only what cannot start now,
        which is what the next admission's wait estimate counts)."""
        try:
            self._apply(self.scheduler.schedule(self.clock()))
        except Exception:  # a bug here must not stop every request; logged, retried by the driver
            log.exception("scheduling pass failed")

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._schedule_now()
            deadline = self.scheduler.next_deadline_s()
            timeout_s = MAX_IDLE_S if deadline is None else min(MAX_IDLE_S, max(0.0, deadline - self.clock()))
            self._driver_wakes_s = self.clock() + timeout_s
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._wake.wait()

    def _apply(self, plan: SchedulePlan) -> None:
        for dispatch in plan.dispatches:
            future = self._waiting.get(dispatch.request_id)
            if future is None or future.done():
                self.scheduler.complete(dispatch.request_id, self.clock())
            else:
                future.set_result(dispatch)
        for expired in plan.expired:
            self._fail(expired.request_id, _expired_error(expired))
        for shed in plan.shed:
            self._fail(shed.request_id, rejection_error(shed))
        if self.clock() - self._depth_updated_s >= DEPTH_INTERVAL_S:
            self._update_depth()

    def _fail(self, request_id: str, error: GatewayError) -> None:
        future = self._waiting.get(request_id)
        if future is not None and not future.done():
            future.set_exception(error)

    def _update_depth(self) -> None:
        self._depth_updated_s = self.clock()
        depth = dict.fromkeys(TIERS_IN_ORDER, 0)
        for queued in self.scheduler.queue.queued():
            depth[queued.tier] += 1
        for tier, count in depth.items():
            self.metrics.queue_depth.labels(tier.value).set(count)


def _expired_error(expired: Expired) -> GatewayError:
    """504 for a request whose deadline passed in the queue: ``model_cold`` (retry when the model
    should be ready) when it was held for a cold start, else ``deadline_exceeded``."""
    late_ms = expired.late_by_s * 1000
    if expired.held:
        retry_s = max(1, math.ceil(expired.ready_in_s)) if expired.ready_in_s is not None else None
        return DeadlineExceededError(
            f"the request waited past its deadline (by {late_ms:.0f} ms) for its model to start from zero "
            "replicas", code="model_cold", retry_after_s=retry_s)
    return DeadlineExceededError(f"the request waited past its deadline (by {late_ms:.0f} ms) before a "
                                 "worker could take it", code="deadline_exceeded")
