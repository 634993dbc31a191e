"""observability.yaml: defaults without a file, a bad field named, the shipped file valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings.base import ConfigError
from settings.observability import load_observability
from settings.paths import StackPaths


def test_without_a_file_access_logs_are_on_and_tracing_is_off(tmp_path: Path) -> None:
    settings = load_observability(tmp_path / "observability.yaml")
    assert settings.access_log.enabled and settings.access_log.to == "file"
    assert not settings.tracing.enabled


def test_the_shipped_file_is_valid() -> None:
    assert load_observability(StackPaths().observability_file).access_log.backup_count == 5


def test_a_bad_endpoint_is_named(tmp_path: Path) -> None:
    path = tmp_path / "observability.yaml"
    path.write_text("tracing: {otlp_endpoint: 'grpc://collector:4317'}\n")
    with pytest.raises(ConfigError, match="otlp_endpoint"):
        load_observability(path)
