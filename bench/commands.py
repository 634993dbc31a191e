"""What ``python -m bench`` runs: one explicit table of commands, each a name and the module behind it.

A command's module has a typer ``app`` with its own options; ``Command.run(args)`` imports that
module only and runs its ``app`` on ``args`` (``NAME --help`` shows them). ``Command.summary()`` is
the first line of the module's docstring, read from the source without importing it, so that
listing the commands stays quick and works whatever a benchmark's own dependencies do.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

PROGRAM = "python -m bench"


@dataclass(frozen=True)
class Command:
    name: str
    module: str

    def summary(self) -> str:
        """The first line of the module's docstring, without reST's double backquotes."""
        spec = importlib.util.find_spec(self.module)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(self.module)
        docstring = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
        return docstring.split("\n", 1)[0].replace("``", "")

    def run(self, args: list[str]) -> None:
        """Run the command's ``app`` on ``args`` (it exits the process, as a typer app does)."""
        importlib.import_module(self.module).app(args=args, prog_name=f"{PROGRAM} {self.name}")


BENCHMARKS = (
    Command("suite", "bench.suite"),
    Command("continuous", "bench.continuous"),
    Command("ceiling", "bench.ceiling"),
    Command("shared_prefix", "bench.shared_prefix"),
    Command("soak", "bench.soak"),
    Command("tenancy", "bench.tenancy.fair_vs_fifo"),
    Command("push", "bench.push"),
    Command("rollout", "bench.rollout"),
    Command("gateways", "bench.gateways"),
    Command("loop_lag", "bench.loop_lag"),
    Command("length_buckets", "bench.length_buckets"),
    Command("chaos", "bench.chaos"),
    Command("cli_startup", "bench.cli_startup"),
    Command("tracing_cost", "bench.tracing_cost"),
)
STUDIES = tuple(Command(f"studies.{name}", f"bench.studies.{name}") for name in (
    "fit_cpu_worker", "served_cost", "served_ttft", "fidelity_real", "fidelity_report",
    "stalls", "prefix_copy", "quantization", "engine_threads", "fleet_fairness", "journal_cost"))
COMMANDS = {command.name: command for command in (*BENCHMARKS, *STUDIES)}


def listing(commands: tuple[Command, ...] = (*BENCHMARKS, *STUDIES)) -> str:
    """One line per command: its name and its summary."""
    width = max(len(command.name) for command in commands)
    return "\n".join(f"{command.name:<{width}}  {command.summary()}" for command in commands)
