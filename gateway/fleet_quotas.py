"""Tenants' quotas across every gateway: ``requests_per_second``, ``tokens_per_minute`` and
``max_concurrent`` taken from the shared state store at admission, before the scheduling core's
own (per-process) check, and given back when the request ends.

``take(request)`` raises the same 429 (or 400 ``too_large``) the core would, with the reason as the
code and ``Retry-After``; ``release(request, generated_tokens)`` gives back the concurrency slot
and the reserved output not generated, in the background (the dispatcher calls it from its one
ending of every request). When the store is unavailable a request is admitted on the core's
per-process quotas alone, and it gives nothing back later (it took nothing).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from gateway.errors import rejection_error
from gateway.metrics import GatewayMetrics
from gateway.periodic import start_periodic, stop
from gateway.state_store.protocol import QuotaRelease, StateStore, StoreUnavailable
from scheduling.outcomes import Rejected, RejectReason
from scheduling.requests import Request


class FleetQuotas:
    def __init__(self, store: StateStore, metrics: GatewayMetrics, lease_s: float,
                 clock: Callable[[], float] = time.time, flush_interval_s: float = 0.02) -> None:
        self._store = store
        self._metrics = metrics
        self._lease_s = lease_s
        self._clock = clock
        self._holding: set[str] = set()  # request ids that took fleet quota and have not given it back
        self._pending: list[QuotaRelease] = []
        self._flusher = start_periodic(self.flush, flush_interval_s, "quota-release")

    async def take(self, request: Request) -> None:
        """Take the request's share of its tenant's fleet-wide quota, or raise the refusal."""
        quotas = request.tenant.quotas
        if quotas.requests_per_second is None and quotas.tokens_per_minute is None and quotas.max_concurrent is None:
            return
        try:
            decision = await self._store.take_quota(request.tenant.name, request.request_id, quotas,
                                                    request.cost_tokens, self._clock(), self._lease_s)
        except StoreUnavailable:
            return
        if decision.refused is None:
            self._holding.add(request.request_id)
            return
        reason = RejectReason(decision.refused.value)
        if decision.refused.value == RejectReason.TOKENS_PER_MINUTE and decision.retry_after_s is None:
            reason = RejectReason.TOO_LARGE  # more than the bucket holds: no wait makes it fit
        self._metrics.rejections.labels(request.tier.value, reason.value).inc()
        raise rejection_error(Rejected(request.request_id, reason, decision.retry_after_s,
                                       {**decision.signals, "fleet_wide": 1.0}))

    def release(self, request: Request, generated_tokens: int) -> None:
        """Give back what ``take`` took (nothing if it took nothing) with the next flush."""
        if request.request_id not in self._holding:
            return
        self._holding.discard(request.request_id)
        self._pending.append(QuotaRelease(request.tenant.name, request.request_id,
                                          request.tenant.quotas, request.unused_tokens(generated_tokens)))

    async def flush(self) -> None:
        """Send the collected releases in one round trip; if the store is unavailable they are
        dropped, and the slots' leases expire in the store."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        with contextlib.suppress(StoreUnavailable):
            await self._store.release_quotas(batch, self._clock())

    async def close(self) -> None:
        await stop(self._flusher)
        await self.flush()
