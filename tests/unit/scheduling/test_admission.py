from scheduling.admission import AdmissionConfig, AdmissionControl
from scheduling.outcomes import RejectReason
from scheduling.prediction.start_wait import WaitEstimate
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import request, tenant

IDLE = WaitEstimate(tokens_ahead=0, service_tokens_per_s=100)


def test_max_concurrent_rejects_with_the_signal_values() -> None:
    control = AdmissionControl(AdmissionConfig())
    who = tenant(max_concurrent=1)
    assert control.check(request(who), IDLE, now=0) is None
    rejected = control.check(request(who), IDLE, now=0)
    assert rejected is not None and rejected.reason is RejectReason.MAX_CONCURRENT
    assert rejected.signals == {"in_flight": 1, "max_concurrent": 1}
    assert rejected.retry_after_s is not None and rejected.retry_after_s > 0


def test_tokens_per_minute_retry_after_is_the_refill_time_of_the_deficit() -> None:
    control = AdmissionControl(AdmissionConfig())
    who = tenant(tokens_per_minute=600)  # 10 tokens/s
    assert control.check(request(who, prefill=500, output=100), IDLE, now=0) is None
    rejected = control.check(request(who, prefill=40, output=10), IDLE, now=0)
    assert rejected is not None and rejected.reason is RejectReason.TOKENS_PER_MINUTE
    assert rejected.retry_after_s == 5.0


def test_unused_output_tokens_are_given_back_at_the_end() -> None:
    control = AdmissionControl(AdmissionConfig())
    who = tenant(tokens_per_minute=600)
    first = request(who, prefill=100, output=500)
    assert control.check(first, IDLE, now=0) is None
    control.release(first, unused_tokens=450, now=0)
    assert control.check(request(who, prefill=100, output=300), IDLE, now=0) is None


def test_a_request_that_cannot_start_before_its_deadline_is_rejected_at_once() -> None:
    control = AdmissionControl(AdmissionConfig())
    slow = WaitEstimate(tokens_ahead=1000, service_tokens_per_s=100)
    rejected = control.check(request(tenant(tier=Tier.PREMIUM), deadline_in_s=2.0), slow, now=0)
    assert rejected is not None and rejected.reason is RejectReason.PREDICTED_SLO_MISS
    assert rejected.signals["predicted_wait_s"] == 10.0 and rejected.retry_after_s == 10.0


def test_overload_sheds_batch_before_standard_before_premium() -> None:
    control = AdmissionControl(AdmissionConfig(shed_wait_s={Tier.PREMIUM: None, Tier.STANDARD: 4.0,
                                                             Tier.BATCH: 1.0}))
    busy = WaitEstimate(tokens_ahead=200, service_tokens_per_s=100)   # 2 s
    for tier, shed in ((Tier.BATCH, True), (Tier.STANDARD, False), (Tier.PREMIUM, False)):
        rejected = control.check(request(tenant(tier.value, tier)), busy, now=0)
        assert (rejected is not None and rejected.reason is RejectReason.TIER_SHED) is shed


def test_quotas_are_not_enforced_when_disabled() -> None:
    control = AdmissionControl(AdmissionConfig(shed_wait_s={}, enforce_quotas=False))
    who = tenant(max_concurrent=1, requests_per_second=1)
    assert all(control.check(request(who), IDLE, now=0) is None for _ in range(20))


def test_a_request_that_would_start_after_its_ttft_objective_is_refused() -> None:
    control = AdmissionControl(AdmissionConfig())
    busy = WaitEstimate(tokens_ahead=300, service_tokens_per_s=100)  # 3 s
    rejected = control.check(request(tenant(tier=Tier.PREMIUM), slo_s=2.0, deadline_in_s=30), busy, now=0)
    assert rejected is not None and rejected.reason is RejectReason.PREDICTED_SLO_MISS
    assert rejected.signals["ttft_slo_s"] == 2.0
    assert control.check(request(tenant(tier=Tier.PREMIUM), slo_s=4.0, deadline_in_s=30), busy, now=0) is None
