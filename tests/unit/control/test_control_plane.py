"""ControlPlane.bootstrap at `shunter up`: a built artifact is pushed, verified once and rendered
from its verified copy; a restart renders the same copy without verifying it again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from control.control_plane import ControlPlane
from control.requirements import runtime_requirements
from settings.paths import StackPaths
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings, WorkloadKind

CONFIG = StackConfig(
    triton=TritonSettings(),
    pools=(PoolSpec(name="local-cpu", models=("tabular",)),),
    models=(ModelSpec(name="tabular", kind=WorkloadKind.TABULAR), ModelSpec(name="spare", kind=WorkloadKind.TABULAR)),
)


@pytest.fixture
def paths(tmp_path: Path) -> StackPaths:
    paths = StackPaths(config_dir=tmp_path / "config", state_dir=tmp_path / "state", repository=tmp_path / "repo")
    built = paths.artifacts / "tabular"
    built.mkdir(parents=True)
    (built / "model.json").write_text('{"trees": []}')
    (built / ".complete").write_text("")
    return paths


@contextmanager
def bootstrapped(paths: StackPaths) -> Iterator[ControlPlane]:
    plane = ControlPlane.open(paths, CONFIG)
    try:
        plane.bootstrap(paths.artifacts)
        yield plane
    finally:
        plane.close()


def test_bootstrap_registers_verifies_once_and_renders_the_verified_copy(
        paths: StackPaths, verifications: list[Path]) -> None:
    with bootstrapped(paths) as plane:
        record = plane.registry.version("tabular", 1)
        assert record is not None
        assert record.requirements == runtime_requirements(CONFIG, "tabular")
        assert record.requirements.gpu_types == ("cpu",)
        assert len(verifications) == 1
        copy = plane.settings.verified_dir / record.manifest_digest / "model.json"
        assert plane.deployer.served == {"tabular": frozenset({1})}
    rendered = paths.repository / "tabular" / "1" / "model.json"
    assert rendered.read_bytes() == copy.read_bytes() == b'{"trees": []}'
    assert sorted(p.name for p in paths.repository.iterdir()) == ["tabular"]  # only what a pool serves


def test_a_restart_renders_from_the_verified_copy_without_verifying_again(
        paths: StackPaths, verifications: list[Path]) -> None:
    with bootstrapped(paths):
        pass
    with bootstrapped(paths) as again:
        assert [v.version for v in again.registry.versions("tabular")] == [1]
    assert len(verifications) == 1
    assert (paths.repository / "tabular" / "1" / "model.json").exists()
