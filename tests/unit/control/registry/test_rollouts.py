"""Rollout records: one active rollout per model, status changes, and their audit entries."""

from __future__ import annotations

import pytest

from control.registry import (
    Registry,
    RegistryConflictError,
    RegistryNotFoundError,
    RegistryValidationError,
    RolloutStatus,
)
from tests.unit.control.registry.support import register


@pytest.fixture
def two_versions(registry: Registry) -> Registry:
    register(registry, version=1)
    register(registry, version=2)
    return registry


def start_canary(registry: Registry, variants: dict[int, float] | None = None):  # type: ignore[no-untyped-def]
    return registry.start_rollout(
        "chat", "canary", 1, variants or {1: 95.0, 2: 5.0}, "tenant", {"max_error_rate": 0.01}, "ops", reason="v2"
    )


def test_start_rollout_records_a_running_rollout(two_versions: Registry) -> None:
    rollout = start_canary(two_versions)
    assert rollout.status is RolloutStatus.RUNNING
    assert (rollout.kind, rollout.baseline_version, rollout.variants) == ("canary", 1, {1: 95.0, 2: 5.0})
    assert rollout.thresholds == {"max_error_rate": 0.01}
    assert two_versions.active_rollout("chat") == rollout
    entry = two_versions.audit_log(action_prefix="rollout.")[0]
    assert (entry.action, entry.subject, entry.reason) == ("rollout.start", "chat", "v2")
    assert entry.details["rollout_id"] == rollout.id
    assert entry.details["variants"] == {"1": 95.0, "2": 5.0}
    assert two_versions.alias("chat") is None  # recording a rollout does not route traffic


def test_a_second_active_rollout_is_refused(two_versions: Registry) -> None:
    first = start_canary(two_versions)
    with pytest.raises(RegistryConflictError, match=f"already has an active rollout \\(id {first.id}\\)"):
        start_canary(two_versions)
    two_versions.update_rollout(first.id, actor="ops", action="rollout.pause", status="paused")
    with pytest.raises(RegistryConflictError):
        start_canary(two_versions)  # paused is still active
    assert [r.id for r in two_versions.rollouts("chat")] == [first.id]


def test_a_finished_rollout_makes_room_for_the_next(two_versions: Registry) -> None:
    first = start_canary(two_versions)
    done = two_versions.update_rollout(
        first.id, actor="ops", action="rollout.promote", status=RolloutStatus.PROMOTED, variants={2: 100.0}
    )
    assert (done.status, done.variants) == (RolloutStatus.PROMOTED, {2: 100.0})
    assert two_versions.active_rollout("chat") is None
    second = two_versions.start_rollout("chat", "ab", None, {1: 50.0, 2: 50.0}, "tenant", {}, "ops")
    assert [r.id for r in two_versions.rollouts("chat")] == [second.id, first.id]
    assert [r.id for r in two_versions.rollouts("chat", limit=1)] == [second.id]


def test_update_rollout_audits_old_and_new_status_and_variants(two_versions: Registry) -> None:
    rollout = start_canary(two_versions)
    stepped = two_versions.update_rollout(
        rollout.id, actor="scheduler", action="rollout.step", variants={1: 75.0, 2: 25.0}, details={"step": 2}
    )
    assert stepped.status is RolloutStatus.RUNNING
    assert stepped.updated_at > rollout.updated_at
    entry = two_versions.audit_log(action_prefix="rollout.step")[0]
    assert entry.actor == "scheduler"
    assert entry.details == {
        "step": 2, "rollout_id": rollout.id, "old_status": "running", "status": "running",
        "old_variants": {"1": 95.0, "2": 5.0}, "variants": {"1": 75.0, "2": 25.0},
    }  # fmt: skip


def test_a_finished_rollout_cannot_be_changed(two_versions: Registry) -> None:
    rollout = start_canary(two_versions)
    two_versions.update_rollout(rollout.id, actor="ops", action="rollout.rollback", status="rolled_back")
    with pytest.raises(RegistryConflictError, match="already ended \\(rolled_back\\)"):
        two_versions.update_rollout(rollout.id, actor="ops", action="rollout.resume", status="running")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"kind": "shadow"}, RegistryValidationError, "kind"),
        ({"sticky": "cookie"}, RegistryValidationError, "sticky"),
        ({"variants": {1: 90.0}}, RegistryValidationError, "add up to 100"),
        ({"thresholds": {"p99_ms": float("nan")}}, RegistryValidationError, "finite"),
        ({"variants": {1: 50.0, 3: 50.0}}, RegistryNotFoundError, "version 3"),
        ({"baseline_version": 9}, RegistryNotFoundError, "version 9"),
        ({"model": "ghost"}, RegistryNotFoundError, "ghost"),
    ],
)
def test_start_rollout_refuses_bad_input(
    two_versions: Registry, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    arguments: dict[str, object] = {
        "model": "chat", "kind": "canary", "baseline_version": 1, "variants": {1: 90.0, 2: 10.0},
        "sticky": "request", "thresholds": {}, "actor": "ops",
    }  # fmt: skip
    with pytest.raises(error, match=message):
        two_versions.start_rollout(**{**arguments, **kwargs})  # type: ignore[arg-type]
    assert two_versions.rollouts("chat") == []


def test_update_rollout_refuses_unknown_ids_and_statuses(two_versions: Registry) -> None:
    rollout = start_canary(two_versions)
    with pytest.raises(RegistryNotFoundError, match="rollout 999"):
        two_versions.update_rollout(999, actor="ops", action="rollout.pause", status="paused")
    with pytest.raises(RegistryValidationError, match="rollout status"):
        two_versions.update_rollout(rollout.id, actor="ops", action="rollout.x", status="done")
    with pytest.raises(RegistryNotFoundError, match="version 4"):
        two_versions.update_rollout(rollout.id, actor="ops", action="rollout.step", variants={4: 100.0})
    assert two_versions.active_rollout("chat") == rollout
