"""Which slots the replica set acts on to reach a model's desired replicas."""

from __future__ import annotations

from control.capacity.slots import ActionKind, SlotAction, SlotView, plan, replicas_of
from settings.capacity_wire import ReplicaState

READY, STOPPED, STARTING, DRAINING = (ReplicaState.READY, ReplicaState.STOPPED, ReplicaState.STARTING,
                                      ReplicaState.DRAINING)


def _slot(index: int, state: ReplicaState, ready: set[str] = frozenset(), loading: set[str] = frozenset(),
          unloading: set[str] = frozenset()) -> SlotView:
    return SlotView(index, state, frozenset(ready), frozenset(loading), frozenset(unloading))


def test_scale_up_starts_the_lowest_stopped_slot_with_only_that_model() -> None:
    slots = [_slot(0, READY, {"embed", "chat"}), _slot(1, STOPPED), _slot(2, STOPPED)]
    assert plan(slots, "embed", 2) == [SlotAction(ActionKind.START, 1, "embed")]
    assert plan(slots, "embed", 3) == [SlotAction(ActionKind.START, 1, "embed"),
                                       SlotAction(ActionKind.START, 2, "embed")]


def test_scale_up_loads_on_a_running_slot_before_starting_a_process() -> None:
    slots = [_slot(0, READY, {"chat"}), _slot(1, READY, {"embed"}), _slot(2, STOPPED)]
    assert plan(slots, "chat", 2) == [SlotAction(ActionKind.LOAD, 1, "chat")]


def test_scale_up_is_bounded_by_the_slots() -> None:
    slots = [_slot(0, READY, {"embed"}), _slot(1, STOPPED)]
    assert plan(slots, "embed", 5) == [SlotAction(ActionKind.START, 1, "embed")]


def test_a_loading_replica_counts_and_is_not_started_twice() -> None:
    slots = [_slot(0, READY, {"embed"}), _slot(1, STARTING, loading={"embed"}), _slot(2, STOPPED)]
    assert replicas_of(slots, "embed") == 2
    assert plan(slots, "embed", 2) == []


def test_scale_down_drains_the_highest_slot_whose_last_model_goes() -> None:
    slots = [_slot(0, READY, {"embed", "chat"}), _slot(1, READY, {"embed"}), _slot(2, READY, {"embed"})]
    assert plan(slots, "embed", 1) == [SlotAction(ActionKind.DRAIN, 2, "embed"),
                                       SlotAction(ActionKind.DRAIN, 1, "embed")]


def test_scale_to_zero_unloads_a_model_from_a_process_that_serves_others() -> None:
    slots = [_slot(0, READY, {"vision", "chat"})]
    assert plan(slots, "vision", 0) == [SlotAction(ActionKind.UNLOAD, 0, "vision")]


def test_draining_and_unloading_replicas_do_not_count() -> None:
    slots = [_slot(0, READY, {"embed"}), _slot(1, DRAINING, unloading={"embed"}),
             _slot(2, READY, {"chat"}, unloading={"embed"})]
    assert replicas_of(slots, "embed") == 1
    assert plan(slots, "embed", 1) == []
    # a slot still unloading the model is not asked to load it again; a stopped one would be
    assert plan(slots, "embed", 2) == []


def test_busy_slots_are_not_scaled_down() -> None:
    slots = [_slot(0, READY, {"embed"}), _slot(1, STARTING, loading={"embed"})]
    assert plan(slots, "embed", 1) == [SlotAction(ActionKind.DRAIN, 0, "embed")]
