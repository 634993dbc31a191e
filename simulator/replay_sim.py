"""The simulated side of the real-stack fidelity check: one fitted worker behind the scheduling
core, configured as the gateway is, driven with the requests the real replay sent.

``simulate_replay(requests, setup, perf, path)`` builds each ``Request`` the way the gateway does
(``gateway/admission.py``: queue deadline and TTFT objective from the tier's SLO, ``max_tokens`` as
the reserved output) and runs ``driver.Simulation`` with one ``LlmWorker`` on ``perf`` whose view
(pool, region, capacity profile, KV pool) is the gateway's and whose reports cross ``path``
(``served_path``: the fixed serving latency; none by default). ``compare_ttft(real, simulated)``
gives p50 and p99 TTFT of both (nearest rank, completed requests) and the relative errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scheduling.capacity import CapacityProfile
from scheduling.requests import Request, RequestKind
from scheduling.slo import Slo
from scheduling.tenants import Tenant, Tier
from scheduling.workers import WorkerView
from simulator.driver import SchedulerLike, Simulation, WorkerSpec
from simulator.metrics import percentile
from simulator.perf.protocol import LlmPerfModel
from simulator.records import RequestRecord, SimRequest
from simulator.served_path import NO_PATH, ServedPath

TOLERANCE = 0.25  # issue 5, target 4: p50 and p99 TTFT within +-25 % of the real stack


@dataclass(frozen=True)
class ReplayRequest:
    """One request of the replayed trace: who sent it, when (s from the start), its templated
    prompt's tokens (as the gateway counts them), ``max_tokens``, and the engine steps its output
    took on the real stack (generated tokens, plus one when it ended on an end-of-generation token)."""

    request_id: str
    tenant: Tenant
    arrival_s: float
    prompt_tokens: int
    max_tokens: int
    output_steps: int


@dataclass(frozen=True)
class GatewaySetup:
    """The gateway's scheduling as configured: a fresh scheduler, SLOs per tier, the worker's
    pool, region and capacity profile, and the model it serves."""

    new_scheduler: Callable[[], SchedulerLike]
    slo: Mapping[Tier, Slo]
    profile: CapacityProfile
    worker_id: str
    pool: str
    region: str
    model: str = "chat"
    model_version: int = 1


def to_sim_request(item: ReplayRequest, setup: GatewaySetup) -> SimRequest:
    slo = setup.slo[item.tenant.tier]
    request = Request(
        request_id=item.request_id, tenant=item.tenant, model=setup.model, kind=RequestKind.LLM,
        arrival_s=item.arrival_s, deadline_s=item.arrival_s + slo.deadline_s, prefill_tokens=item.prompt_tokens,
        max_output_tokens=item.max_tokens, ttft_slo_s=slo.ttft_s)
    return SimRequest(request, max(1, item.output_steps))


def simulate_replay(requests: Sequence[ReplayRequest], setup: GatewaySetup, perf: LlmPerfModel,
                    path: ServedPath = NO_PATH) -> list[RequestRecord]:
    """Records in arrival order; see the module docstring. ``path``: the worker's serving path."""
    view = WorkerView(setup.worker_id, setup.pool, setup.region, setup.profile,
                      {setup.model: frozenset({setup.model_version})},
                      kv_total_tokens=perf.limits.kv_pool_tokens)
    arrivals = sorted((to_sim_request(r, setup) for r in requests), key=lambda r: r.request.arrival_s)
    result = Simulation(setup.new_scheduler(), [WorkerSpec(perf, view, path=path)], arrivals,
                        lambda request: setup.slo[request.tier]).run()
    return sorted(result.records, key=lambda r: r.arrival_s)


@dataclass(frozen=True)
class TtftComparison:
    """p50 and p99 TTFT (s) of the real and the simulated run, and ``simulated / real - 1``."""

    real_p50_s: float
    real_p99_s: float
    sim_p50_s: float
    sim_p99_s: float
    real_count: int
    sim_count: int

    @property
    def p50_error(self) -> float:
        return self.sim_p50_s / self.real_p50_s - 1.0

    @property
    def p99_error(self) -> float:
        return self.sim_p99_s / self.real_p99_s - 1.0

    @property
    def within(self) -> bool:
        return abs(self.p50_error) <= TOLERANCE and abs(self.p99_error) <= TOLERANCE


def compare_ttft(real_ttft_s: Sequence[float], sim_ttft_s: Sequence[float]) -> TtftComparison:
    """Raise ValueError if either side has no TTFT."""
    values = [percentile(list(v), p) for v in (real_ttft_s, sim_ttft_s) for p in (50, 99)]
    if any(v is None for v in values):
        raise ValueError("both runs need at least one completed request")
    real_p50, real_p99, sim_p50, sim_p99 = (float(v) for v in values if v is not None)
    return TtftComparison(real_p50, real_p99, sim_p50, sim_p99, len(real_ttft_s), len(sim_ttft_s))
