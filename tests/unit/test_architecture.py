"""The layering of docs/architecture.md (pyproject.toml's import-linter contracts), checked on every test run."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    linter = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
