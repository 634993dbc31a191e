"""The registry's API against a real SQLite file: versions, aliases, deployments, audit."""

from __future__ import annotations

import dataclasses

import pytest

from control.registry import (
    Registry,
    RegistryConflictError,
    RegistryNotFoundError,
    RegistryValidationError,
    RuntimeRequirements,
    VersionState,
)
from tests.unit.control.registry.support import CHAT, StepClock, register


def test_register_and_list_versions(registry: Registry) -> None:
    register(registry, version=2)
    first = register(registry, version=1)
    register(registry, model="embed", version=1)
    assert first.state is VersionState.REGISTERED
    assert first.requirements == CHAT
    assert first.created_by == "alice"
    assert registry.models() == ["chat", "embed"]
    assert [v.version for v in registry.versions("chat")] == [1, 2]
    assert registry.version("chat", 1) == first
    assert registry.version("chat", 3) is None
    assert registry.versions("unknown") == []


def test_registering_an_existing_version_is_a_conflict(registry: Registry) -> None:
    register(registry)
    with pytest.raises(RegistryConflictError, match="version 1 of model 'chat' is already registered"):
        register(registry)
    assert len(registry.audit_log(action_prefix="version.register")) == 1


def test_a_model_keeps_its_kind(registry: Registry) -> None:
    registry.ensure_model("chat", "chat", "alice")
    registry.ensure_model("chat", "chat", "alice")  # idempotent: no second audit entry
    assert [e.action for e in registry.audit_log()] == ["model.create"]
    with pytest.raises(RegistryConflictError, match="kind 'chat'"):
        registry.ensure_model("chat", "embedding", "alice")
    embedding = RuntimeRequirements(backend="onnxruntime", kind="embedding")
    with pytest.raises(RegistryConflictError, match="kind 'chat'"):
        registry.register_version("chat", 2, "s3://x", "sha256:x", "key", embedding, "alice")


def test_version_state_changes_are_audited(registry: Registry) -> None:
    register(registry)
    ready = registry.set_version_state("chat", 1, "ready", "ops", reason="loaded", details={"pool": "gpu-a"})
    assert ready.state is VersionState.READY
    assert registry.version("chat", 1) == ready
    entry = registry.audit_log(action_prefix="version.state")[0]
    assert (entry.actor, entry.subject, entry.reason) == ("ops", "chat", "loaded")
    assert entry.details == {"pool": "gpu-a", "version": 1, "old_state": "registered", "new_state": "ready"}
    with pytest.raises(RegistryNotFoundError):
        registry.set_version_state("chat", 9, VersionState.READY, "ops")
    with pytest.raises(RegistryValidationError, match="version state"):
        registry.set_version_state("chat", 1, "live", "ops")


def test_set_alias_bumps_the_generation_and_audits_old_and_new_weights(registry: Registry) -> None:
    register(registry, version=1)
    register(registry, version=2)
    assert registry.alias("chat") is None
    assert registry.routing_generation() == 0
    first = registry.set_alias("chat", {1: 100.0}, "request", "alice", "alias.set", reason="first release")
    assert (first.weights, first.sticky, first.generation) == ({1: 100.0}, "request", 1)
    second = registry.set_alias(
        "chat", {1: 95.0, 2: 5.0}, "tenant", "rollouts", "rollout.step", details={"step": 1, "rollout_id": 7}
    )
    assert (second.weights, second.generation) == ({1: 95.0, 2: 5.0}, 2)
    assert registry.alias("chat") == second
    assert registry.aliases() == [second]
    assert registry.routing_generation() == 2
    (created,) = registry.audit_log(subject="chat", action_prefix="alias.")
    (step,) = registry.audit_log(subject="chat", action_prefix="rollout.step")
    assert step.details == {
        "step": 1, "rollout_id": 7, "old_weights": {"1": 100.0}, "new_weights": {"1": 95.0, "2": 5.0},
        "old_sticky": "request", "sticky": "tenant", "generation": 2,
    }  # fmt: skip
    assert created.details["old_weights"] is None
    assert created.reason == "first release"


def test_routing_generation_sums_over_all_aliases(registry: Registry) -> None:
    register(registry, "chat")
    register(registry, "embed")
    registry.set_alias("chat", {1: 100.0}, "request", "alice", "alias.set")
    registry.set_alias("embed", {1: 100.0}, "request", "alice", "alias.set")
    registry.set_alias("embed", {1: 100.0}, "tenant", "alice", "alias.set")
    assert registry.routing_generation() == 3


@pytest.mark.parametrize(
    ("weights", "sticky", "error", "message"),
    [
        ({1: 60.0, 2: 30.0}, "request", RegistryValidationError, "add up to 100"),
        ({1: 120.0, 2: -20.0}, "request", RegistryValidationError, "negative"),
        ({}, "request", RegistryValidationError, "at least one"),
        ({1: 100.0}, "sometimes", RegistryValidationError, "sticky"),
        ({1: 50.0, 3: 50.0}, "request", RegistryNotFoundError, "no registered version 3"),
    ],
)
def test_set_alias_refuses_bad_input_and_writes_nothing(
    registry: Registry, weights: dict[int, float], sticky: str, error: type[Exception], message: str
) -> None:
    register(registry, version=1)
    register(registry, version=2)
    registry.set_alias("chat", {1: 100.0}, "request", "alice", "alias.set")
    before = registry.audit_log()
    with pytest.raises(error, match=message):
        registry.set_alias("chat", weights, sticky, "alice", "alias.set")
    assert registry.alias("chat") is not None
    assert registry.alias("chat").generation == 1  # type: ignore[union-attr]
    assert registry.audit_log() == before


def test_set_alias_on_an_unknown_model_is_not_found(registry: Registry) -> None:
    with pytest.raises(RegistryNotFoundError, match="model 'ghost'"):
        registry.set_alias("ghost", {1: 100.0}, "request", "alice", "alias.set")


def test_deployments_are_stored_and_audited(registry: Registry) -> None:
    register(registry)
    assert registry.deployment("chat") is None
    first = registry.set_deployment("chat", ["gpu-a"], 1, 0, "ops")
    second = registry.set_deployment("chat", ("gpu-a", "gpu-b"), 2, 1, "ops", reason="more traffic")
    assert (second.pools, second.instances, second.min_warm_replicas) == (("gpu-a", "gpu-b"), 2, 1)
    assert registry.deployment("chat") == second
    assert first.updated_at < second.updated_at
    entry = registry.audit_log(action_prefix="deployment.")[0]
    assert entry.details["old"] == {"pools": ["gpu-a"], "instances": 1, "min_warm_replicas": 0}
    assert entry.details["new"] == {"pools": ["gpu-a", "gpu-b"], "instances": 2, "min_warm_replicas": 1}
    with pytest.raises(RegistryValidationError, match="pools"):
        registry.set_deployment("chat", [], 1, 0, "ops")
    with pytest.raises(RegistryValidationError, match="instances"):
        registry.set_deployment("chat", ["gpu-a"], -1, 0, "ops")
    with pytest.raises(RegistryNotFoundError):
        registry.set_deployment("ghost", ["gpu-a"], 1, 0, "ops")


def test_every_change_writes_one_audit_entry_in_order(registry: Registry, clock: StepClock) -> None:
    register(registry)
    registry.set_alias("chat", {1: 100.0}, "request", "alice", "alias.set")
    registry.set_deployment("chat", ["gpu-a"], 1, 0, "ops")
    note = registry.audit("analyst", "canary.verdict", "chat", reason="p99 ok", details={"p99_ms": 120.5})
    log = registry.audit_log()
    assert [e.action for e in log] == [
        "canary.verdict", "deployment.set", "alias.set", "version.register", "model.create",
    ]  # fmt: skip
    assert log[0] == note
    assert [e.id for e in log] == sorted((e.id for e in log), reverse=True)
    assert all(e.subject == "chat" for e in log)
    assert log[0].at == clock.now
    assert registry.audit_log(limit=2) == log[:2]
    assert registry.audit_log(subject="embed") == []


def test_audit_details_must_be_json(registry: Registry) -> None:
    with pytest.raises(RegistryValidationError, match="JSON"):
        registry.audit("ops", "note", "chat", details={"when": object()})
    with pytest.raises(RegistryValidationError, match="actor"):
        registry.audit("", "note", "chat")
    assert registry.audit_log() == []


def test_action_prefix_is_matched_literally(registry: Registry) -> None:
    registry.audit("ops", "rollout_x", "chat")
    registry.audit("ops", "rollout.start", "chat")
    assert [e.action for e in registry.audit_log(action_prefix="rollout.")] == ["rollout.start"]
    assert [e.action for e in registry.audit_log(action_prefix="rollout_")] == ["rollout_x"]


def test_returned_records_are_frozen(registry: Registry) -> None:
    version = register(registry)
    alias = registry.set_alias("chat", {1: 100.0}, "request", "alice", "alias.set")
    entry = registry.audit_log()[0]
    for record, field in ((version, "state"), (alias, "generation"), (entry, "action")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)


def test_the_api_offers_no_way_to_change_the_audit_log() -> None:
    names = {name for name in dir(Registry) if not name.startswith("_")}
    assert not {name for name in names if "audit" in name} - {"audit", "audit_log"}
