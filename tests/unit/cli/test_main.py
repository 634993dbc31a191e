"""The ``shunter`` command's root: an operator command loads neither the control plane's process
and storage code nor the simulator's experiments."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from cli.main import app

HEAVY = ("uvicorn", "sqlalchemy", "boto3", "fastapi", "matplotlib", "scipy", "control.stack", "simulator.suite",
         "gateway")


def test_importing_the_cli_loads_no_process_storage_or_experiment_code() -> None:
    probe = ("import json, sys, cli.main; "
             f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                       timeout=60).stdout)
    assert loaded == []


def test_hash_key_prints_the_at_rest_form_of_a_key() -> None:
    result = CliRunner().invoke(app, ["hash-key", "demo-premium-key"])
    assert result.exit_code == 0
    assert result.output.strip() == "24fdfedfe3f3458eae8dfd32a021ba503cb73dca09e14591a41821f5f9af91fe"
