"""Pool planning: the cheapest mix of GPU types that meets the SLO targets on a workload, with a
given policy in the loop (the Melange question, answered by simulation).

Search: for each GPU type alone, the fewest GPUs that meet the targets (counting up); then every
mix of up to ``max_types`` types that costs less than the cheapest single-type pool found, cheapest
first, skipping any mix that has no more of every type than a mix that already failed (it cannot
do better), and any mix too small to carry the load, until one meets the targets or
``max_evaluations`` runs were spent.

"Too small": the single-type runs give each type's served rate per GPU (requests per second that
met the SLO, over the GPU count; the best such run, so the estimate errs high), and a mix whose
summed rate is below ``capacity_slack`` x the required rate (overall attainment target x offered
rate) is not simulated. The slack leaves room for a mix to beat the sum of its parts (each prompt
length sent to the type that serves it cheapest; at the default 0.85, by up to 18 %). Without it,
the cheapest-first order spends the evaluation budget on hopeless small mixes once the load needs
more than a few GPUs (at 10 x the conversation trace, 60 runs reached no mix that could meet).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from simulator.metrics import RunSummary
from simulator.pools import mix_cost_per_hour, mix_label
from simulator.records import SimRequest
from simulator.runner import RunSpec, simulate

PLANNING_TYPES = ("a10", "a100-80", "h100", "h200")


@dataclass(frozen=True)
class Targets:
    premium_attainment: float = 0.99
    overall_attainment: float = 0.95

    def met(self, summary: RunSummary) -> bool:
        premium = summary.by_tier.get("premium")
        return (summary.overall.attainment >= self.overall_attainment
                and (premium is None or premium.attainment >= self.premium_attainment))


@dataclass(frozen=True)
class Evaluation:
    mix: dict[str, int]
    cost_per_hour: float
    attainment: float
    premium_attainment: float | None
    met: bool
    preemptions: int = 0


@dataclass
class Plan:
    evaluations: list[Evaluation] = field(default_factory=list)
    best_single: Evaluation | None = None
    best_mix: Evaluation | None = None
    skipped_too_small: int = 0  # mixes not simulated: estimated capacity below the required rate

    @property
    def savings(self) -> float | None:
        """Share of the cheapest single-type pool's cost that the cheapest mix saves."""
        if self.best_single is None or self.best_mix is None:
            return None
        return 1.0 - self.best_mix.cost_per_hour / self.best_single.cost_per_hour


def _dominated(mix: Mapping[str, int], failed: Sequence[Mapping[str, int]]) -> bool:
    return any(all(mix.get(t, 0) <= f.get(t, 0) for t in set(mix) | set(f)) for f in failed)


def offered_rps(arrivals: Sequence[SimRequest]) -> float:
    """Requests per second over the arrivals' span (0 for fewer than two arrivals)."""
    if len(arrivals) < 2:
        return 0.0
    span_s = max(a.request.arrival_s for a in arrivals) - min(a.request.arrival_s for a in arrivals)
    return len(arrivals) / span_s if span_s > 0 else 0.0


def served_rps_per_gpu(evaluations: Sequence[Evaluation], offered: float) -> dict[str, float]:
    """Per GPU type, the highest rate one GPU served within the SLO in a single-type run:
    attainment x offered rate / GPU count (an estimate that errs high)."""
    rates: dict[str, float] = {}
    for evaluation in evaluations:
        if len(evaluation.mix) == 1:
            (gpu, count), = evaluation.mix.items()
            rates[gpu] = max(rates.get(gpu, 0.0), evaluation.attainment * offered / count)
    return rates


def too_small(mix: Mapping[str, int], rates: Mapping[str, float], required_rps: float) -> bool:
    """True when every type of ``mix`` has a rate estimate and together they fall short of
    ``required_rps``."""
    if any(gpu not in rates for gpu in mix):
        return False
    return sum(count * rates[gpu] for gpu, count in mix.items()) < required_rps


def plan_pool(arrivals: Sequence[SimRequest], policy: str = "shunter", targets: Targets | None = None,
              types: Sequence[str] = PLANNING_TYPES, max_per_type: int = 32, max_types: int = 2,
              max_evaluations: int = 60, seed: int = 0,
              progress: Callable[[Evaluation], None] | None = None, capacity_slack: float = 0.85) -> Plan:
    """The search of the module docstring; ``capacity_slack`` 0 simulates every candidate mix."""
    if not 0.0 <= capacity_slack <= 1.0:
        raise ValueError("capacity_slack must be within [0, 1]")
    targets = targets or Targets()
    plan = Plan()
    failed: list[dict[str, int]] = []

    def evaluate(mix: dict[str, int]) -> Evaluation:
        _, summary = simulate(RunSpec(policy, mix, seed), arrivals)
        premium = summary.by_tier.get("premium")
        result = Evaluation(dict(mix), mix_cost_per_hour(mix), summary.overall.attainment,
                            premium.attainment if premium else None, targets.met(summary), summary.preemptions)
        plan.evaluations.append(result)
        if not result.met:
            failed.append(dict(mix))
        if progress is not None:
            progress(result)
        return result

    for gpu in types:
        ceiling = plan.best_single.cost_per_hour if plan.best_single else float("inf")
        passed = _fewest(gpu, evaluate, max_per_type, ceiling, lambda: len(plan.evaluations) < max_evaluations)
        if passed is not None and (plan.best_single is None or passed.cost_per_hour < plan.best_single.cost_per_hour):
            plan.best_single = passed
    ceiling = plan.best_single.cost_per_hour if plan.best_single else float("inf")
    offered = offered_rps(arrivals)
    rates = served_rps_per_gpu(plan.evaluations, offered)
    required_rps = capacity_slack * targets.overall_attainment * offered
    for mix in _candidate_mixes(types, max_per_type, max_types, ceiling):
        if len(plan.evaluations) >= max_evaluations:
            break
        if _dominated(mix, failed):
            continue
        if too_small(mix, rates, required_rps):
            plan.skipped_too_small += 1
            continue
        result = evaluate(mix)
        if result.met:
            plan.best_mix = result
            break
    return plan


def _fewest(gpu: str, evaluate: Callable[[dict[str, int]], Evaluation], max_count: int, ceiling: float,
            budget_left: Callable[[], bool]) -> Evaluation | None:
    """The fewest GPUs of one type, costing less than ``ceiling``, that meet the targets: count up
    (by a quarter once past 4), then bisect between the last failing and the first passing count."""
    failed, count = 0, 1
    passed: Evaluation | None = None
    while count <= max_count and mix_cost_per_hour({gpu: count}) < ceiling and budget_left():
        result = evaluate({gpu: count})
        if result.met:
            passed = result
            break
        failed, count = count, count + 1 if count < 4 else count + max(1, count // 4)
    while passed is not None and passed.mix[gpu] - failed > 1 and budget_left():
        middle = (failed + passed.mix[gpu]) // 2
        result = evaluate({gpu: middle})
        if result.met:
            passed = result
        else:
            failed = middle
    return passed


def _candidate_mixes(types: Sequence[str], max_per_type: int, max_types: int,
                     ceiling: float) -> list[dict[str, int]]:
    """Mixes of 2..``max_types`` types (each at least 1 GPU) cheaper than ``ceiling``, cheapest first."""
    mixes: list[dict[str, int]] = []
    for size in range(2, max_types + 1):
        for combo in itertools.combinations(types, size):
            for counts in itertools.product(range(1, max_per_type + 1), repeat=size):
                mix = dict(zip(combo, counts, strict=True))
                if mix_cost_per_hour(mix) < ceiling:
                    mixes.append(mix)
    return sorted(mixes, key=lambda m: (mix_cost_per_hour(m), mix_label(m)))
