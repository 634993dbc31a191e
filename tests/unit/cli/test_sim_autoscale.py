"""``shunter sim autoscale``: bad arguments are refused with exit code 2 before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app


@pytest.mark.parametrize("args", [["--gpu", "tpu"], ["--day-s", "5"], ["--peak-replicas", "0"],
                                  ["--peak-replicas", "many"]])
def test_bad_arguments_exit_2(args: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sim", "autoscale", "--out", str(tmp_path), *args])
    assert result.exit_code == 2
    assert not any(tmp_path.iterdir())
