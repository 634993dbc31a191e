"""Which replica slots to act on so that ``desired`` replicas of one model run on one pool.

Pure: the replica set's view in, a list of actions out (the replica set runs them). A pool has a
fixed number of slots (its reserved ports); a slot is a Triton process (or none) with the models
it has loaded (``ready``), is loading and warming (``loading``) and is draining (``unloading``).
A model's replicas on a pool are the slots where it is ready or loading.

Scaling up loads the model first on running slots that lack it (no new process), lowest index
first, then starts stopped slots with it. Scaling down takes the model off the highest-index
slots first, ready ones before ones still loading (a load is not interrupted): a slot left with
no model is drained and stopped as a whole, otherwise only the model is unloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from settings.capacity_wire import ReplicaState


class ActionKind(StrEnum):
    START = "start"    # start a stopped slot's process with the model
    LOAD = "load"      # load and warm the model on a running slot
    UNLOAD = "unload"  # take the model off a slot that keeps serving others
    DRAIN = "drain"    # drain and stop the slot's process (its last model goes)


@dataclass(frozen=True)
class SlotView:
    """One slot as the replica set sees it now."""

    index: int
    state: ReplicaState
    ready: frozenset[str] = frozenset()
    loading: frozenset[str] = frozenset()
    unloading: frozenset[str] = frozenset()

    @property
    def busy(self) -> bool:
        """Starting or draining: no other action may start on it."""
        return self.state in (ReplicaState.STARTING, ReplicaState.DRAINING)

    def has(self, model: str) -> bool:
        return self.state is not ReplicaState.DRAINING and model in (self.ready | self.loading)


@dataclass(frozen=True)
class SlotAction:
    kind: ActionKind
    index: int
    model: str


def replicas_of(slots: Sequence[SlotView], model: str) -> int:
    """Slots where ``model`` is ready or loading."""
    return sum(1 for slot in slots if slot.has(model))


def plan(slots: Sequence[SlotView], model: str, desired: int) -> list[SlotAction]:
    """The actions that bring ``model`` to ``desired`` replicas (as many as the slots allow)."""
    current = replicas_of(slots, model)
    if desired > current:
        return _grow(slots, model, desired - current)
    if desired < current:
        return _shrink(slots, model, current - desired)
    return []


def _grow(slots: Sequence[SlotView], model: str, count: int) -> list[SlotAction]:
    ordered = sorted(slots, key=lambda s: s.index)
    running = [s for s in ordered if s.state is ReplicaState.READY and not s.has(model)
               and model not in s.unloading]
    stopped = [s for s in ordered if s.state is ReplicaState.STOPPED]
    actions = [SlotAction(ActionKind.LOAD, s.index, model) for s in running]
    actions += [SlotAction(ActionKind.START, s.index, model) for s in stopped]
    return actions[:count]


def _shrink(slots: Sequence[SlotView], model: str, count: int) -> list[SlotAction]:
    serving = [s for s in slots if s.has(model) and not s.busy]
    # ready before loading, then the highest index first
    serving.sort(key=lambda s: (model in s.loading, -s.index))
    actions = []
    for slot in serving[:count]:
        others = (slot.ready | slot.loading) - {model}
        kind = ActionKind.UNLOAD if others else ActionKind.DRAIN
        actions.append(SlotAction(kind, slot.index, model))
    return actions
