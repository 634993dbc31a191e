"""The ``shunter`` command's root: ``import cli.main`` loads none of the sub-commands' modules,
httpx or the pydantic settings, and an operator command's module (``cli.ops``) neither the control
plane's process and storage code nor the simulator (a test of the imports, not of timing: the
start-up time is measured by ``python -m bench cli_startup``)."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from cli.main import ShunterGroup, app

HEAVY = ("uvicorn", "sqlalchemy", "boto3", "fastapi", "matplotlib", "scipy", "control.stack", "simulator",
         "gateway", "pydantic", "yaml", "httpx._main", "pygments", "scheduling.scheduler", "settings.base")
SUB_COMMANDS = ("cli.ops", "cli.scale", "cli.sim", "cli.kubernetes", "cli.tokens", "httpx")


def _loaded(module: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with ``prefixes`` that a fresh interpreter has after importing ``module``."""
    probe = (f"import json, sys, {module}; "
             f"print(json.dumps(sorted(m for m, v in sys.modules.items() if v and m.startswith({prefixes!r}))))")
    loaded: list[str] = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                                  check=True, timeout=60).stdout)
    return loaded


def test_importing_the_cli_loads_no_sub_command_http_client_or_settings_model() -> None:
    assert _loaded("cli.main", (*HEAVY, *SUB_COMMANDS)) == []


def test_an_operator_commands_module_loads_no_process_storage_settings_or_simulator_code() -> None:
    assert _loaded("cli.ops", HEAVY) == []


def test_each_lazy_sub_command_is_listed_with_its_own_help_line() -> None:
    for name, entry in ShunterGroup.lazy.items():
        command = entry.load(name)
        assert command.name == name
        assert (command.help or "").strip().split("\n")[0] == entry.help, name


def test_the_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in (*ShunterGroup.lazy, "up", "status", "hash-key"):
        assert f" {name} " in result.output, name


def test_hash_key_prints_the_at_rest_form_of_a_key() -> None:
    result = CliRunner().invoke(app, ["hash-key", "demo-premium-key"])
    assert result.exit_code == 0
    assert result.output.strip() == "24fdfedfe3f3458eae8dfd32a021ba503cb73dca09e14591a41821f5f9af91fe"
