"""Sub-commands whose modules are imported only when they run, so that ``shunter --help`` and
one operator command start without the simulator, the Kubernetes renderer, pydantic or httpx.

``LazyGroup`` is the top-level click group (``typer.Typer(cls=...)``). Its ``lazy`` table names,
for each lazy sub-command, the module and attribute that define it (a ``typer.Typer`` sub-app or
a command function) and the one-line help the top-level ``--help`` lists without importing it;
``tests/unit/cli/test_main.py`` holds each line to the loaded command's own help. Running a
sub-command, or asking for its ``--help``, imports its module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.main
from typer import core


@dataclass(frozen=True)
class LazyCommand:
    """``module:attribute`` defines the command; ``help`` is its first help line."""

    target: str
    help: str

    def load(self, name: str) -> Any:
        """The click command ``target`` defines, named ``name``."""
        module_name, _, attribute = self.target.partition(":")
        defined = getattr(importlib.import_module(module_name), attribute)
        command: Any
        if isinstance(defined, typer.Typer):
            command = typer.main.get_group(defined)  # a sub-app: no shell-completion options of its own
        else:
            single = typer.Typer(add_completion=False)
            single.command(name)(defined)
            command = typer.main.get_command(single)
        command.name = name
        return command


class LazyGroup(core.TyperGroup):
    """A typer group that adds the ``lazy`` sub-commands, loading each on first use."""

    lazy: ClassVar[Mapping[str, LazyCommand]] = {}
    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self.lazy.get(cmd_name)
        if entry is None or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        if self._listing:  # the group's own --help: a placeholder with the help line, nothing imported
            return core.TyperGroup(name=cmd_name, help=entry.help)
        self.commands[cmd_name] = entry.load(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
