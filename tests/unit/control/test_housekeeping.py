"""control.housekeeping on a real control plane (SQLite registry, local artifact store, verified
copies on disk): a version that never served is deleted whole; prune frees retired and failed
versions' artifacts but keeps the version an undo would bring back, and orphaned copies go."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from control.control_plane import ControlPlane, push_directory
from control.housekeeping import HousekeepingError, delete_unserved, prune
from control.registry import RolloutStatus, VersionState
from control.requirements import runtime_requirements
from settings.paths import StackPaths
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings, WorkloadKind

CONFIG = StackConfig(
    triton=TritonSettings(),
    pools=(PoolSpec(name="local-cpu", models=("tabular",)),),
    models=(ModelSpec(name="tabular", kind=WorkloadKind.TABULAR),),
)


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    paths = StackPaths(config_dir=tmp_path / "config", state_dir=tmp_path / "state", repository=tmp_path / "repo")
    built = paths.artifacts / "tabular"
    built.mkdir(parents=True)
    (built / "model.json").write_text('{"trees": []}')
    opened = ControlPlane.open(paths, CONFIG)
    try:
        opened.bootstrap(paths.artifacts)  # v1, live and ready
        opened.mark_served_ready()
        yield opened
    finally:
        opened.close()


def push(plane: ControlPlane, tmp_path: Path, version: int) -> None:
    source = tmp_path / f"v{version}"
    source.mkdir()
    (source / "model.json").write_text(f'{{"trees": [], "version": {version}}}')
    spec = CONFIG.models[0]
    push_directory(plane.store, plane.registry, source, spec, version, runtime_requirements(CONFIG, "tabular"),
                   plane.settings.local_signing_key, "test", "test push")
    record = plane.registry.version("tabular", version)
    assert record is not None
    plane.deployer.copies.copy_of(record)  # verified, as registration does


def test_a_version_that_never_served_is_deleted_whole(plane: ControlPlane, tmp_path: Path) -> None:
    push(plane, tmp_path, 2)
    record = plane.registry.version("tabular", 2)
    assert record is not None and plane.store.exists("tabular", 2)
    freed = delete_unserved(plane, "tabular", 2, "ana", "pushed by mistake")
    assert freed.store_deleted and freed.verified_bytes > 0
    assert plane.registry.version("tabular", 2) is None and not plane.store.exists("tabular", 2)
    assert not (plane.deployer.copies.root / record.manifest_digest).exists()
    assert plane.registry.audit_log(subject="tabular", action_prefix="version.delete")[0].actor == "ana"
    with pytest.raises(HousekeepingError) as served:
        delete_unserved(plane, "tabular", 1, "ana", "")
    assert served.value.code == "served_before"


def test_prune_frees_retired_and_failed_versions_but_keeps_the_undo_target(
        plane: ControlPlane, tmp_path: Path) -> None:
    for version in (2, 3, 4):
        push(plane, tmp_path, version)
    registry = plane.registry
    # v1 -> v2 promoted (v1 retired: the undo target), v3 failed a canary, v4 never ran
    rollout = registry.start_rollout("tabular", "canary", 1, {1: 90.0, 2: 10.0}, "request", {}, "ana")
    registry.update_rollout(rollout.id, actor="ana", action="promote", status=RolloutStatus.PROMOTED,
                            variants={1: 0.0, 2: 100.0})
    registry.set_alias("tabular", {2: 100.0}, "request", "ana", "rollout.promote")
    registry.set_version_state("tabular", 2, VersionState.READY, "test")
    registry.set_version_state("tabular", 1, VersionState.RETIRED, "test")
    registry.set_version_state("tabular", 3, VersionState.FAILED, "test", "canary rolled back")
    orphan = plane.deployer.copies.root / ("f" * 64)
    orphan.mkdir()
    (orphan / "model.json").write_text("{}")

    planned = prune(plane, "ana", "weekly", dry_run=True)
    assert {(f.model, f.version) for f in planned} == {("tabular", 3), ("", None)}
    assert plane.store.exists("tabular", 3) and orphan.exists()  # a dry run deletes nothing

    done = prune(plane, "ana", "weekly", dry_run=False)
    assert {(f.model, f.version) for f in done} == {("tabular", 3), ("", None)}
    assert not plane.store.exists("tabular", 3) and not orphan.exists()
    assert plane.store.exists("tabular", 1) and plane.store.exists("tabular", 4)  # undo target, never ran
    assert registry.version("tabular", 3) is not None  # the record stays
    assert prune(plane, "ana", "again", dry_run=False) == []
