"""Where a stack keeps its files: everything under its state directory."""

from __future__ import annotations

from pathlib import Path

from settings.paths import StackPaths


def test_the_rendered_repository_lives_under_the_state_dir() -> None:
    one, two = StackPaths(state_dir=Path("/tmp/a")), StackPaths(state_dir=Path("/tmp/b"))
    assert one.repository == Path("/tmp/a/model_repository")
    assert two.repository == Path("/tmp/b/model_repository")
    assert StackPaths().repository == StackPaths().state_dir / "model_repository"


def test_an_explicit_repository_is_kept() -> None:
    assert StackPaths(state_dir=Path("/tmp/a"), repository=Path("/srv/repo")).repository == Path("/srv/repo")
