"""observability.yaml: defaults without a file, a bad field named, the shipped file valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from settings.base import ConfigError
from settings.observability import TracingSettings, load_observability, traced_workers, triton_trace_args
from settings.paths import StackPaths
from settings.stack import load_stack_config


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


def test_tracing_off_renders_no_triton_flags_and_leaves_the_config_alone() -> None:
    config = load_stack_config(StackPaths().pools_file, StackPaths().models_file)
    assert triton_trace_args(TracingSettings()) == ()
    assert traced_workers(config, TracingSettings()) is config


def test_tracing_on_gives_every_worker_tritons_opentelemetry_flags_after_its_own() -> None:
    config = load_stack_config(StackPaths().pools_file, StackPaths().models_file)
    tracing = TracingSettings(otlp_endpoint="http://127.0.0.1:4318/", sample_ratio=0.25)
    args = traced_workers(config, tracing).triton.extra_args
    assert args[:len(config.triton.extra_args)] == config.triton.extra_args
    assert {"--trace-config=mode=opentelemetry", "--trace-config=rate=4",
            "--trace-config=opentelemetry,url=127.0.0.1:4318/v1/traces",
            "--trace-config=opentelemetry,resource=service.name=shunter-triton"} <= set(args)
