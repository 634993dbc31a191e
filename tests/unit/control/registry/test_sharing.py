"""Two Registry objects on one SQLite file, as the control API and the scheduler thread use it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from control.registry import Registry, RegistryConflictError
from tests.unit.control.registry.support import register


@pytest.fixture
def second(registry: Registry, db_url: str) -> Iterator[Registry]:
    other = Registry.open(db_url)
    yield other
    other.close()


def test_each_registry_sees_the_others_changes(registry: Registry, second: Registry) -> None:
    register(registry, version=1)
    register(second, version=2)
    assert [v.version for v in registry.versions("chat")] == [1, 2]
    second.set_alias("chat", {1: 80.0, 2: 20.0}, "request", "api", "alias.set")
    assert registry.alias("chat") == second.alias("chat")
    assert registry.routing_generation() == 1
    rollout = registry.start_rollout("chat", "canary", 1, {1: 80.0, 2: 20.0}, "request", {}, "scheduler")
    with pytest.raises(RegistryConflictError):
        second.start_rollout("chat", "canary", 1, {1: 80.0, 2: 20.0}, "request", {}, "api")
    assert second.active_rollout("chat") == rollout
    assert registry.audit_log() == second.audit_log()


def test_concurrent_writers_on_one_file_all_succeed(registry: Registry, second: Registry) -> None:
    register(registry, version=1)
    register(registry, version=2)
    errors: list[BaseException] = []
    rounds = 25

    def writer(target: Registry, actor: str, weights: dict[int, float]) -> None:
        try:
            for _ in range(rounds):
                target.set_alias("chat", weights, "tenant", actor, "alias.set")
                target.audit(actor, "note", "chat")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(registry, "api", {1: 100.0})),
        threading.Thread(target=writer, args=(second, "scheduler", {2: 100.0})),
        threading.Thread(target=writer, args=(registry, "api-2", {1: 50.0, 2: 50.0})),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert second.routing_generation() == 3 * rounds
    generations = [int(str(e.details["generation"])) for e in registry.audit_log(action_prefix="alias.", limit=1000)]
    assert sorted(generations) == list(range(1, 3 * rounds + 1))  # no lost update
