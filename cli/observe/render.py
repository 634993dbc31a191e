"""``shunter observe``: render the Prometheus rules and Grafana dashboards from the configuration.

``rendered_files(paths)`` maps each file under ``deploy/observability/`` to the text this
configuration renders; ``shunter observe render`` writes them, and ``--check`` fails when a
checked-in file differs (a unit test runs the same comparison), so the rules follow the tier SLOs in
``scheduling.yaml`` and the error budget in ``control.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from cli.observe.dashboards import DASHBOARDS, dashboard_json
from cli.observe.rules import render_rules
from settings.control import load_control_settings
from settings.paths import PROJECT_ROOT, StackPaths
from settings.scheduling import load_scheduling
from settings.stack import load_stack_config

OBSERVABILITY_DIR = PROJECT_ROOT / "deploy" / "observability"
RULES_FILE = Path("rules") / "shunter.rules.yml"
HEADER = "# Rendered by `shunter observe render` from config/ (cli/observe/rules.py); do not edit by hand.\n"

observe_app = typer.Typer(help="Prometheus rules and Grafana dashboards (docs/observability.md).",
                          no_args_is_help=True)


def rendered_files(paths: StackPaths) -> dict[Path, str]:
    """Each file under ``deploy/observability/`` (relative path) and the text ``paths``' configuration renders."""
    config = load_stack_config(paths.pools_file, paths.models_file)
    scheduling = load_scheduling(paths.scheduling_file, config)
    error_budget = load_control_settings(paths.control_file, paths.state_dir).replicas.error_budget
    cost = {pool.name: scheduling.profile_of(pool.profile_name).cost_per_hour for pool in config.pools}
    rules = yaml.safe_dump(render_rules(scheduling, error_budget, cost), sort_keys=False, width=120)
    files = {RULES_FILE: HEADER + rules}
    for name in DASHBOARDS:
        files[Path("dashboards") / f"{name}.json"] = dashboard_json(name)
    return files


@observe_app.command("render")
def render(config_dir: Annotated[Path, typer.Option(help="the stack's configuration")] = StackPaths.config_dir,
           out: Annotated[Path, typer.Option(help="where to write")] = OBSERVABILITY_DIR,
           check: Annotated[bool, typer.Option(help="only compare; exit 1 if a file differs")] = False) -> None:
    """Write (or check) the rules and dashboards rendered from the configuration."""
    stale = []
    for relative, text in rendered_files(StackPaths(config_dir=config_dir.resolve())).items():
        target = out / relative
        if check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        typer.echo(f"wrote {target}")
    if stale:
        typer.echo("out of date (run `shunter observe render`): " + ", ".join(stale), err=True)
        raise typer.Exit(code=1)
