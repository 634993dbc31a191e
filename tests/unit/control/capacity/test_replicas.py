"""The replica set's reading side without Triton: slots from the stack and capacity.yaml, the
replicas document the gateways poll, counts, predicted cold starts and the deployer's live view."""

from __future__ import annotations

from pathlib import Path

from control.capacity.replicas import LiveAddresses
from settings.capacity_wire import ReplicaState
from settings.control import ReplicaSettings
from tests.unit.control.capacity.support import Clock, open_controller


def test_the_stack_workers_are_ready_replicas_and_the_other_slots_stopped(tmp_path: Path) -> None:
    with open_controller(tmp_path, Clock()) as controller:
        replicas = controller.replicas
        document = replicas.document()
        states = {(r.name, r.state) for r in document.replicas}
        assert states == {("local-cpu-0", ReplicaState.READY), ("local-cpu-1", ReplicaState.STOPPED)}
        first = next(r for r in document.replicas if r.index == 0)
        assert set(first.models) == {"chat", "embed", "rerank", "vision", "tabular"}
        assert document.serves("local-cpu", 0, "embed") and not document.serves("local-cpu", 1, "embed")
        counts = replicas.counts("local-cpu", "embed")
        assert (counts.ready, counts.starting, counts.draining) == (1, 0, 0)


def test_a_cold_start_is_a_load_on_a_running_pool_plus_a_boot_on_an_empty_one(tmp_path: Path) -> None:
    with open_controller(tmp_path, Clock()) as controller:
        replicas = controller.replicas
        settings = ReplicaSettings()  # what open_controller gives it
        assert replicas.cold_start_s()["embed"] == settings.default_load_s  # a replica of the pool runs
        replicas.load_s["embed"] = 2.5
        assert replicas.cold_start_s()["embed"] == 2.5
        replicas.slots["local-cpu"][0].state = ReplicaState.STOPPED
        assert replicas.cold_start_s()["embed"] == 2.5 + settings.default_boot_s


def test_rollouts_see_the_running_replicas_with_their_models(tmp_path: Path) -> None:
    with open_controller(tmp_path, Clock()) as controller:
        live = LiveAddresses(controller.replicas)
        assert [a.name for a in live] == ["local-cpu-0"]
        assert len(live) == 1 and "vision" in live[0].models
        slot = controller.replicas.slots["local-cpu"][0]
        slot.ready.discard("vision")
        assert "vision" not in next(iter(live)).models
