"""``python -m control`` runs control alone only in Kubernetes mode and with its admin token."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from control.__main__ import cli
from settings.base import ConfigError


def _run(tmp_path: Path, control_yaml: str) -> BaseException | None:
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "config" / "control.yaml").write_text(control_yaml)
    result = CliRunner().invoke(cli, ["--config-dir", str(tmp_path / "config"), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code != 0
    return result.exception


def test_the_local_mode_is_refused_with_a_pointer_to_shunter_up(tmp_path: Path) -> None:
    error = _run(tmp_path, "mode: local\n")
    assert isinstance(error, ConfigError) and "shunter up" in str(error)


def test_a_missing_admin_token_is_refused_before_anything_starts(tmp_path: Path) -> None:
    error = _run(tmp_path, "mode: kubernetes\nkubernetes:\n  repository_uri: s3://models/repo\n")
    assert isinstance(error, ConfigError) and "admin token" in str(error)
