"""Admission: accept a request into the queue, or reject it at once with a reason and the signal
values behind it.

Checks, in order: the tenant's max concurrent requests, its requests-per-second and
tokens-per-minute buckets (both taken together or neither), the predicted queue wait (the
``WaitEstimate`` the scheduler's ``Predictor`` gives) against the request's deadline and its
time-to-first-token objective (``predicted_slo_miss``: a request that would start too late to
meet its SLO is refused now rather than failed later), and overload
shedding in tier order: each tier has a largest predicted wait it accepts (batch the smallest,
premium none), and since a lower tier's wait includes every higher band's backlog, batch is shed
first, then standard, then premium.
A request held for a cold start (``holding``) is checked against the tenant's quotas only
(``check_held``): its wait is the cold start, which no TTFT objective or shedding limit measures.
``Retry-After`` is computed from the bucket deficit or the predicted wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.buckets import TokenBucket
from scheduling.outcomes import Rejected, RejectReason
from scheduling.prediction.start_wait import WaitEstimate
from scheduling.requests import Request
from scheduling.tenants import Tenant, Tier

CONCURRENCY_RETRY_S = 1.0


@dataclass(frozen=True)
class AdmissionConfig:
    """``shed_wait_s``: per tier, the largest predicted queue wait still admitted (None: no limit)."""

    shed_wait_s: dict[Tier, float | None] = field(default_factory=lambda: {
        Tier.PREMIUM: None, Tier.STANDARD: 4.0, Tier.BATCH: 1.0})
    enforce_quotas: bool = True
    reject_predicted_misses: bool = True


@dataclass
class _TenantState:
    in_flight: int = 0
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None


class AdmissionControl:
    """Per-tenant quota state and the admission decision; see the module docstring."""

    def __init__(self, config: AdmissionConfig) -> None:
        self.config = config
        self._tenants: dict[str, _TenantState] = {}

    def _state(self, tenant: Tenant) -> _TenantState:
        state = self._tenants.get(tenant.name)
        if state is None:
            quotas = tenant.quotas
            rps = quotas.requests_per_second
            tpm = quotas.tokens_per_minute
            state = _TenantState(
                requests=TokenBucket(max(1.0, rps), rps) if rps else None,
                tokens=TokenBucket(float(tpm), tpm / 60.0) if tpm else None,
            )
            self._tenants[tenant.name] = state
        return state

    def in_flight(self, tenant: str) -> int:
        state = self._tenants.get(tenant)
        return state.in_flight if state else 0

    def check(self, request: Request, estimate: WaitEstimate, now: float) -> Rejected | None:
        """None to admit (and then the quotas are taken), else the rejection."""
        if self.config.enforce_quotas:
            rejected = self._check_quotas(request, now)
            if rejected is not None:
                return rejected
        if self.config.reject_predicted_misses:
            rejected = self._check_wait(request, estimate, now)
            if rejected is not None:
                return rejected
        self._take(request, now)
        return None

    def check_held(self, request: Request, now: float) -> Rejected | None:
        """Admission of a request held for a cold start: the tenant's quotas only (then they are
        taken); its deadline against the ready time is ``holding.refuse_hold``'s."""
        if self.config.enforce_quotas:
            rejected = self._check_quotas(request, now)
            if rejected is not None:
                return rejected
        self._take(request, now)
        return None

    def _check_quotas(self, request: Request, now: float) -> Rejected | None:
        state, quotas = self._state(request.tenant), request.tenant.quotas
        rid = request.request_id
        if quotas.max_concurrent is not None and state.in_flight >= quotas.max_concurrent:
            return Rejected(rid, RejectReason.MAX_CONCURRENT, CONCURRENCY_RETRY_S,
                            {"in_flight": state.in_flight, "max_concurrent": quotas.max_concurrent})
        if state.requests is not None and state.requests.available(now) < 1:
            return Rejected(rid, RejectReason.REQUESTS_PER_SECOND, state.requests.wait_s(1, now),
                            {"requests_per_second": state.requests.rate_per_s})
        if state.tokens is not None:
            cost = request.cost_tokens
            if cost > state.tokens.capacity:
                return Rejected(rid, RejectReason.TOO_LARGE, None,
                                {"cost_tokens": cost, "tokens_per_minute": state.tokens.capacity})
            if state.tokens.available(now) < cost:
                return Rejected(rid, RejectReason.TOKENS_PER_MINUTE, state.tokens.wait_s(cost, now),
                                {"cost_tokens": cost, "tokens_available": state.tokens.available(now),
                                 "tokens_per_minute": state.tokens.capacity})
        return None

    def _check_wait(self, request: Request, estimate: WaitEstimate, now: float) -> Rejected | None:
        wait_s = estimate.predicted_wait_s
        signals = {"predicted_wait_s": wait_s, "tokens_ahead": estimate.tokens_ahead,
                   "service_tokens_per_s": estimate.service_tokens_per_s}
        if estimate.capacity_wait_s:
            signals["capacity_wait_s"] = estimate.capacity_wait_s
        retry_s = wait_s if wait_s != float("inf") else None
        slo_s = request.ttft_slo_s if request.ttft_slo_s is not None else float("inf")
        service_s = estimate.service_s
        late = wait_s > slo_s or service_s <= slo_s < wait_s + service_s
        if now + wait_s > request.deadline_s or late:
            return Rejected(request.request_id, RejectReason.PREDICTED_SLO_MISS, retry_s,
                            {**signals, "deadline_in_s": request.deadline_s - now, "ttft_slo_s": slo_s})
        limit = self.config.shed_wait_s.get(request.tier)
        if limit is not None and wait_s > limit:
            return Rejected(request.request_id, RejectReason.TIER_SHED, retry_s,
                            {**signals, "tier_wait_limit_s": limit})
        return None

    def _take(self, request: Request, now: float) -> None:
        state = self._state(request.tenant)
        state.in_flight += 1
        if not self.config.enforce_quotas:
            return
        if state.requests is not None:
            state.requests.try_take(1, now)
        if state.tokens is not None:
            state.tokens.try_take(request.cost_tokens, now)

    def release(self, request: Request, unused_tokens: float, now: float) -> None:
        """The request ended (any outcome): free its concurrency slot, return unused tokens."""
        state = self._state(request.tenant)
        state.in_flight = max(0, state.in_flight - 1)
        if self.config.enforce_quotas and state.tokens is not None and unused_tokens > 0:
            state.tokens.give_back(unused_tokens, now)
