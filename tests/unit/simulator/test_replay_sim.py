"""The simulated side of the real-stack check: requests built as the gateway builds them, one
fitted worker behind the shipped scheduler, and the TTFT comparison."""

from __future__ import annotations

import pytest

from scheduling.admission import AdmissionConfig
from scheduling.capacity import CapacityProfile
from scheduling.requests import RequestKind
from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.slo import Slo
from scheduling.tenants import Tenant, Tier
from scheduling.workers import ModelLimits
from simulator.perf.fitted import FittedPerf
from simulator.perf.protocol import EngineLimits
from simulator.perf.step_fit import StepLaw
from simulator.replay_sim import GatewaySetup, ReplayRequest, compare_ttft, simulate_replay, to_sim_request

PERF = FittedPerf(EngineLimits(16, 63, 63, 8192, short_prefill_first=True),
                  StepLaw(0.004, 0.003, 0.006, 0.004))
SLO = {Tier.PREMIUM: Slo(4.0, 0.15, 30.0), Tier.STANDARD: Slo(8.0, 0.3, 60.0), Tier.BATCH: Slo(30.0, 1.0, 300.0)}
PROFILE = CapacityProfile("cpu", 8, 8192, 4096, 1500.0, 120.0, 0.1, max_sequences=16)
LIMITS = {"chat": ModelLimits("chat", RequestKind.LLM, tier_share={Tier.PREMIUM: 1.0, Tier.STANDARD: 0.75,
                                                                    Tier.BATCH: 0.5}, max_prefill_line_s=0.25)}
SETUP = GatewaySetup(lambda: build_scheduler(SchedulerConfig(Policy.FAIR, 4096, AdmissionConfig()), LIMITS),
                     SLO, PROFILE, "local-cpu-0", "local-cpu", "local")
TENANT = Tenant("demo-standard", Tier.STANDARD, 2.0)


def test_requests_get_the_tiers_deadline_and_objective_and_their_real_output() -> None:
    item = ReplayRequest("r1", TENANT, 2.0, 120, 32, 17)
    sim = to_sim_request(item, SETUP)
    assert sim.request.deadline_s == 62.0 and sim.request.ttft_slo_s == 8.0
    assert sim.request.max_output_tokens == 32 and sim.output_tokens == 17


def test_a_lone_request_waits_only_for_its_prefill() -> None:
    records = simulate_replay([ReplayRequest("r1", TENANT, 1.0, 130, 16, 8)], SETUP, PERF)
    assert records[0].outcome == "completed"
    assert records[0].ttft_s == pytest.approx(PERF.prefill_s(130))


def test_every_request_ends_once_in_arrival_order() -> None:
    requests = [ReplayRequest(f"r{i}", TENANT, 0.1 * i, 40 + 30 * i, 32, 20) for i in range(20)]
    records = simulate_replay(list(reversed(requests)), SETUP, PERF)
    assert [r.request_id for r in records] == [f"r{i}" for i in range(20)]
    assert all(r.outcome for r in records)


def test_the_comparison_gives_nearest_rank_percentiles_and_relative_errors() -> None:
    comparison = compare_ttft([1.0] * 98 + [4.0, 5.0], [1.2] * 98 + [4.0, 6.0])
    assert (comparison.real_p50_s, comparison.real_p99_s) == (1.0, 4.0)
    assert comparison.p50_error == pytest.approx(0.2) and comparison.p99_error == pytest.approx(0.0)
    assert comparison.within
    with pytest.raises(ValueError):
        compare_ttft([], [1.0])
