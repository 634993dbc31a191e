"""Registries on real SQLite files in tmp_path, with a clock the tests control."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from control.registry import Registry
from tests.unit.control.registry.support import StepClock


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A SQLite file in a folder that does not exist yet (migrate creates it)."""
    return f"sqlite:///{tmp_path / 'state' / 'registry.db'}"


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def registry(db_url: str, clock: StepClock) -> Iterator[Registry]:
    opened = Registry.open(db_url, clock=clock)
    yield opened
    opened.close()
