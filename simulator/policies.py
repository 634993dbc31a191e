"""The policies the simulator compares, each built fresh per run from the model limits and a seed.

``shunter`` is the core as shipped (``Policy.FAIR`` with the shipped tier shares and shed waits).
``fcfs`` is arrival order to the least-loaded worker with no deadline and no queue bound (vLLM-style
engines behind a plain load balancer: the core's ``Policy.FIFO`` wrapped by
``baselines.deadlines``); ``round-robin`` is the same with workers in rotation
(``RoundRobinPlacement``). ``fifo-gateway`` is the core's ``Policy.FIFO`` as shipped (the gateway's
queue deadline and ``max_queued`` kept). ``priority-only`` is strict tiers without tenant fairness
or quotas (``TierPriorityQueue``, least-loaded worker, gateway deadlines kept); ``triton-queue``
has no gateway queue at all (``baselines.triton_queue``). ``shunter-slo`` is the shipped core
configured with each tier's queue deadline and shed wait set to its TTFT objective (since TTFT
expiry ships, the difference is the shed waits: batch is shed past 20 s of predicted wait, not 5 s).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scheduling.admission import AdmissionConfig
from scheduling.placement.round_robin import round_robin_placement
from scheduling.priority_queue import TierPriorityQueue
from scheduling.scheduler import Policy, SchedulerConfig, build_scheduler
from scheduling.workers import ModelLimits
from simulator.baselines.deadlines import DeadlineOverride, no_deadline, slo_deadline
from simulator.baselines.triton_queue import TritonQueue
from simulator.driver import SchedulerLike
from simulator.tenancy import SHED_WAIT_S, SLOS

MAX_QUEUED = 4096  # config/scheduling.yaml
UNBOUNDED = 10**9

Builder = Callable[[Mapping[str, ModelLimits], int], SchedulerLike]


@dataclass(frozen=True)
class PolicySpec:
    name: str
    description: str
    build: Builder
    lazy_timeouts: bool = False  # the workers' engines time queued requests out (Triton queue policy)


def _shunter(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    config = SchedulerConfig(Policy.FAIR, MAX_QUEUED, AdmissionConfig(shed_wait_s=dict(SHED_WAIT_S)))
    return build_scheduler(config, limits, seed)


def _shunter_slo(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    shed = {tier: (None if wait is None else SLOS[tier].ttft_s) for tier, wait in SHED_WAIT_S.items()}
    config = SchedulerConfig(Policy.FAIR, MAX_QUEUED, AdmissionConfig(shed_wait_s=shed))
    return DeadlineOverride(build_scheduler(config, limits, seed), slo_deadline)


def _fcfs(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    return DeadlineOverride(build_scheduler(SchedulerConfig(Policy.FIFO, UNBOUNDED), limits, seed), no_deadline)


def _fifo_gateway(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    return build_scheduler(SchedulerConfig(Policy.FIFO, MAX_QUEUED), limits, seed)


def _round_robin(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    config = SchedulerConfig(Policy.FIFO, UNBOUNDED)
    return DeadlineOverride(build_scheduler(config, limits, seed, placement=round_robin_placement), no_deadline)


def _priority_only(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    return build_scheduler(SchedulerConfig(Policy.FIFO, MAX_QUEUED), limits, seed, queue=TierPriorityQueue())


def _triton_queue(limits: Mapping[str, ModelLimits], seed: int) -> SchedulerLike:
    return TritonQueue()


class PolicyRegistry:
    """An explicit registry (no import-time side effects): name → spec."""

    def __init__(self, specs: list[PolicySpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}

    def names(self) -> list[str]:
        return list(self._specs)

    def get(self, name: str) -> PolicySpec:
        if name not in self._specs:
            raise KeyError(f"unknown policy {name!r}; known: {', '.join(self._specs)}")
        return self._specs[name]


def default_registry() -> PolicyRegistry:
    return PolicyRegistry([
        PolicySpec("shunter", "the scheduling core as shipped (fair policy)", _shunter),
        PolicySpec("shunter-slo", "the core as shipped, tier deadlines and shed waits = TTFT objectives",
                   _shunter_slo),
        PolicySpec("fcfs", "arrival order, least-loaded worker, no deadline (plain load balancer)", _fcfs),
        PolicySpec("round-robin", "arrival order, workers in rotation, no deadline", _round_robin),
        PolicySpec("fifo-gateway", "the core's fifo policy: arrival order, queue deadlines, max_queued",
                   _fifo_gateway),
        PolicySpec("triton-queue", "no gateway queue: per-worker FIFO, max queue size, lazy timeouts",
                   _triton_queue, lazy_timeouts=True),
        PolicySpec("priority-only", "strict tiers, arrival order inside a tier, no tenant fairness", _priority_only),
    ])
