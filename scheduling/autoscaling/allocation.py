"""Replicas of one model across its pools: floors first, then capacity added where a token costs
least at the objective, until the demand is covered and the required total is met, within the
per-pool maximum, the model's caps and one step's limit (llm-d's workload-variant rule: add on
the cheapest variant; as demand falls the expensive pools empty first, since they are filled last).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.autoscaling.types import PoolModel, Reason

_EPS = 1e-9


@dataclass(frozen=True)
class PoolOption:
    """One pool a model may grow on: its replica capacity and price, and its bounds."""

    key: PoolModel
    tokens_per_s: float  # one replica at the objective
    cost_per_hour: float
    min_replicas: int
    max_replicas: int
    floor: int = 0  # KV or residency floor (never above max_replicas)

    @property
    def cost_per_token(self) -> float:
        return self.cost_per_hour / 3600.0 / self.tokens_per_s


@dataclass(frozen=True)
class Limits:
    """What bounds one allocation beyond each pool's maximum (``None``: unbounded)."""

    step_total: int | None = None  # the most replicas this step may reach (not a budget cap)
    model_replicas: int | None = None
    model_cost_per_hour: float | None = None


@dataclass(frozen=True)
class Allocation:
    """Replicas per pool, the share of the demand they cover, and the cap that stopped growth
    (``None`` when the demand was met or only the step limit stopped it)."""

    replicas: Mapping[PoolModel, int]
    coverage: float
    capped: Reason | None


def allocate(options: Sequence[PoolOption], demand_tokens_per_s: float, required_total: int,
             limits: Limits) -> Allocation:
    """Cheapest-first allocation; see the module docstring."""
    alloc = {o.key: max(o.min_replicas, min(o.floor, o.max_replicas)) for o in options}
    capped: Reason | None = None
    for option in sorted(options, key=lambda o: (o.cost_per_token, o.key.pool)):
        deficit_tokens = demand_tokens_per_s - _capacity(options, alloc)
        deficit_total = required_total - sum(alloc.values())
        if deficit_tokens <= _EPS and deficit_total <= 0:
            break
        wanted = max(math.ceil(deficit_tokens / option.tokens_per_s - _EPS) if deficit_tokens > _EPS else 0,
                     deficit_total)
        room, binding = _room(option, alloc, options, limits)
        added = max(0, min(wanted, room))
        alloc[option.key] += added
        if added < wanted and binding is not None:
            capped = binding
    met = (demand_tokens_per_s - _capacity(options, alloc) <= _EPS and sum(alloc.values()) >= required_total)
    return Allocation(alloc, _coverage(options, alloc, demand_tokens_per_s), None if met else capped)


def _room(option: PoolOption, alloc: Mapping[PoolModel, int], options: Sequence[PoolOption],
          limits: Limits) -> tuple[int, Reason | None]:
    """How many replicas ``option`` may still add, and the cap that binds first (None: the step)."""
    total = sum(alloc.values())
    rooms: list[tuple[int, Reason | None]] = [(option.max_replicas - alloc[option.key], Reason.MAX_REPLICAS)]
    if limits.model_replicas is not None:
        rooms.append((limits.model_replicas - total, Reason.MODEL_CAP))
    if limits.model_cost_per_hour is not None and option.cost_per_hour > 0:
        spent = sum(alloc[o.key] * o.cost_per_hour for o in options)
        rooms.append((math.floor((limits.model_cost_per_hour - spent) / option.cost_per_hour + _EPS), Reason.MODEL_CAP))
    if limits.step_total is not None:
        rooms.append((limits.step_total - total, None))
    room, binding = min(rooms, key=lambda r: r[0])
    return max(0, room), binding


def _capacity(options: Sequence[PoolOption], alloc: Mapping[PoolModel, int]) -> float:
    return sum(alloc[o.key] * o.tokens_per_s for o in options)


def _coverage(options: Sequence[PoolOption], alloc: Mapping[PoolModel, int], demand_tokens_per_s: float) -> float:
    """Capacity over demand (``inf`` with no demand)."""
    capacity = _capacity(options, alloc)
    return capacity / demand_tokens_per_s if demand_tokens_per_s > _EPS else math.inf
