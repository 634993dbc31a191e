"""``shunter tokens create|list|revoke``: per-operator admin tokens with roles (admin only).

A token is printed once, by ``create``; control keeps only its SHA-256. An operator puts it in
``$SHUNTER_TOKEN`` and every ``shunter`` command then acts, and is audited, under its name.
Roles: ``viewer`` reads; ``operator`` also pushes, rolls out, undoes, prunes and scales;
``admin`` also manages trusted keys and tokens (see ``control/operator_auth.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.markup import escape

from cli.admin_client import DEFAULT_CONTROL_URL
from cli.ops import TOKEN_ENV, ControlUrl, JsonOutput, Reason, StateDir, _client, console, operator_errors
from cli.tables import tokens_table
from settings.paths import StackPaths

tokens_app = typer.Typer(help="Operator tokens for the admin API, with roles (admin only).", no_args_is_help=True)
TokenName = Annotated[str, typer.Argument(help="the operator's name: it is the audit log's actor")]


class RoleName(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


@tokens_app.command("create")
def create(name: TokenName, role: Annotated[RoleName, typer.Option(help="what the token may do")],
           json_output: JsonOutput = False, reason: Reason = "", control_url: ControlUrl = DEFAULT_CONTROL_URL,
           state_dir: StateDir = StackPaths.state_dir) -> None:
    """Make a token for NAME with ROLE and print it (once: control keeps only its hash)."""
    with operator_errors(), _client(state_dir, control_url) as client:
        created = client.create_token(name, role.value, reason)
    if json_output:
        console.print_json(data=created)
        return
    console.print(f"token for [bold]{escape(name)}[/] ({role.value}); shown once, store it now:")
    console.print(created["token"], soft_wrap=True, markup=False, highlight=False)
    console.print(f"use it with: export {TOKEN_ENV}=<token>")


@tokens_app.command("list")
def list_tokens(json_output: JsonOutput = False, control_url: ControlUrl = DEFAULT_CONTROL_URL,
                state_dir: StateDir = StackPaths.state_dir) -> None:
    """The operator tokens: name, role, created when and by whom (never the tokens)."""
    with operator_errors(), _client(state_dir, control_url) as client:
        tokens = client.tokens()
    if json_output:
        console.print_json(data=tokens)
        return
    console.print(tokens_table(tokens))


@tokens_app.command("revoke")
def revoke(name: TokenName, reason: Reason = "", control_url: ControlUrl = DEFAULT_CONTROL_URL,
           state_dir: StateDir = StackPaths.state_dir) -> None:
    """Revoke NAME's token: it stops working at once (audited)."""
    with operator_errors(), _client(state_dir, control_url) as client:
        revoked = client.revoke_token(name, reason)
    console.print(f"revoked the {revoked['role']} token of [bold]{escape(name)}[/]")
