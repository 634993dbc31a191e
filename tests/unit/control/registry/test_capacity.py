"""Capacity settings in the registry: stored with their audit entry in one transaction, replaced
in place, validated, and an expiry deletes the override with its own entry."""

from __future__ import annotations

import pytest

from control.registry import Registry, RegistryValidationError
from control.registry.capacity import CapacityBoundsRecord, CapacityOverrideRecord
from tests.unit.control.registry.support import StepClock


def test_bounds_are_stored_replaced_and_audited(registry: Registry, clock: StepClock) -> None:
    registry.set_capacity_bounds("gpu", "chat", 1, 4, "alice", "more for the launch", {"old": {"max": 2}})
    stored = registry.set_capacity_bounds("gpu", "chat", 2, 3, "bob", "less")
    assert registry.capacity_bounds() == [stored]
    assert stored == CapacityBoundsRecord("gpu", "chat", 2, 3, stored.updated_at, "bob")
    entries = registry.audit_log(subject="chat", action_prefix="capacity.")
    assert [(e.actor, e.reason, e.details["pool"]) for e in entries] == [("bob", "less", "gpu"),
                                                                         ("alice", "more for the launch", "gpu")]
    assert entries[1].details["old"] == {"max": 2}


@pytest.mark.parametrize(("low", "high"), [(3, 2), (-1, 2), (1, True)])
def test_bad_bounds_are_refused_and_nothing_is_stored(registry: Registry, low: int, high: int) -> None:
    with pytest.raises(RegistryValidationError):
        registry.set_capacity_bounds("gpu", "chat", low, high, "alice")
    assert registry.capacity_bounds() == [] and registry.audit_log() == []


def test_override_is_stored_and_its_expiry_deletes_it_with_an_entry(registry: Registry) -> None:
    with pytest.raises(RegistryValidationError):
        registry.put_capacity_override("gpu", "chat", 2, 100.0, "bob", " ")
    registry.put_capacity_override("gpu", "chat", 2, 100.0, "bob", "incident 1")
    registry.put_capacity_override("gpu", "chat", 3, 200.0, "bob", "incident 2")
    assert registry.capacity_overrides() == [CapacityOverrideRecord("gpu", "chat", 3, 200.0, "incident 2", "bob")]
    expired = registry.expire_capacity_override("gpu", "chat", "capacity-controller")
    assert expired is not None and expired.replicas == 3
    assert registry.capacity_overrides() == []
    assert registry.expire_capacity_override("gpu", "chat", "capacity-controller") is None
    actions = [e.action for e in registry.audit_log(subject="chat")]
    assert actions == ["capacity.override_expired", "capacity.override", "capacity.override"]
