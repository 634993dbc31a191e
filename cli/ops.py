"""Operator commands of the control plane (registered by ``cli.main``).

``shunter models push|list``, ``shunter rollout start|promote|pause|resume|rollback|status``,
``shunter ab start|status``, ``shunter keys generate`` and ``shunter audit``. Every command but
``keys generate`` talks to the control admin API through ``cli.admin_client.AdminClient``,
as ``--actor`` (default ``$USER@hostname``). Expected failures (integrity, artifact store,
configuration, the API) are printed in red with their code and exit with status 1, never a
traceback; malformed arguments are usage errors (status 2). The control plane's artifact, signing
and requirements code is imported by the commands that use it (``push``, ``keys generate``), so the
commands that only call the admin API start without it.
"""

from __future__ import annotations

import getpass
import re
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from cli.admin_client import DEFAULT_CONTROL_URL, ROLLOUT_ACTIONS, AdminApiError, AdminClient
from cli.tables import audit_table, models_table, status_renderables, version_table
from control.errors import ControlError
from settings.control import load_control_settings
from settings.paths import StackPaths, admin_token
from settings.stack import ConfigError, StackConfig, WorkloadKind, load_stack_config

if TYPE_CHECKING:
    from control.artifacts import ArtifactStore

models_app = typer.Typer(help="Model versions in the registry: push signed artifacts, list them.",
                         no_args_is_help=True)
rollout_app = typer.Typer(help="Canary rollouts: start, promote, pause, resume, roll back, show status.",
                          no_args_is_help=True)
ab_app = typer.Typer(help="A/B tests between versions (pause, promote or roll back with `shunter rollout`).",
                     no_args_is_help=True)
keys_app = typer.Typer(help="ed25519 keys that sign artifacts.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VARIANT = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


class StickyMode(StrEnum):
    REQUEST = "request"
    TENANT = "tenant"


ConfigDir = Annotated[Path, typer.Option(help="folder with pools.yaml, models.yaml, control.yaml")]
StateDir = Annotated[Path, typer.Option(help="folder for artifacts, logs, keys and state")]
ControlUrl = Annotated[str, typer.Option(help="control API base URL")]
Actor = Annotated[str | None, typer.Option(help="who acts, for the audit log (default: $USER@hostname)")]
Reason = Annotated[str, typer.Option(help="why, for the audit log")]
ModelArg = Annotated[str, typer.Argument(help="model name")]
Sticky = Annotated[StickyMode, typer.Option(help="what keeps a caller on one version")]


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _paths(config_dir: Path, state_dir: Path) -> StackPaths:
    return StackPaths(config_dir=config_dir.resolve(), state_dir=state_dir.resolve())


def _client(state_dir: Path, control_url: str, actor: str | None) -> AdminClient:
    token = admin_token(_paths(StackPaths.config_dir, state_dir))
    return AdminClient(control_url, token, actor or default_actor())


def _error_code(exc: Exception) -> str:
    from control.artifacts import ArtifactExistsError, ArtifactStoreError
    from control.integrity import IntegrityError

    if isinstance(exc, AdminApiError):
        return f"{exc.code}, HTTP {exc.status}" if exc.status else exc.code
    if isinstance(exc, IntegrityError):
        return exc.code
    if isinstance(exc, ArtifactStoreError):
        return "artifact_exists" if isinstance(exc, ArtifactExistsError) else "artifact_store"
    if isinstance(exc, ConfigError):
        return "bad_config"
    if isinstance(exc, FileExistsError):
        return "exists"
    return "os_error" if isinstance(exc, OSError) else "invalid"


@contextmanager
def operator_errors() -> Iterator[None]:
    """Print an expected failure in red with its code and exit 1."""
    try:
        yield
    except (AdminApiError, ControlError, OSError, ValueError) as exc:
        err_console.print(f"[bold red]error[/] [red]({escape(_error_code(exc))})[/]: {escape(str(exc))}")
        raise typer.Exit(code=1) from exc


def print_status(status: dict[str, Any]) -> None:
    for part in status_renderables(status):
        console.print(part)


def parse_variants(text: str) -> dict[int, int]:
    """``"2:50,3:50"`` -> ``{2: 50, 3: 50}``: two or more distinct versions, integer weights in
    1..99 that sum to 100. Raises ``ValueError`` saying what is wrong."""
    variants: dict[int, int] = {}
    for item in text.split(","):
        match = _VARIANT.match(item)
        if match is None:
            raise ValueError(f"{item.strip()!r} is not VERSION:WEIGHT with integers (e.g. 2:50,3:50)")
        version, weight = int(match[1]), int(match[2])
        if version in variants:
            raise ValueError(f"version {version} is listed twice")
        if not 0 < weight < 100:
            raise ValueError(f"weight of version {version} must be in 1..99, got {weight}")
        variants[version] = weight
    if len(variants) < 2:
        raise ValueError("an A/B test needs at least two versions")
    if (total := sum(variants.values())) != 100:
        raise ValueError(f"weights sum to {total}, not 100")
    return variants


def _requirements(paths: StackPaths, name: str, kind: WorkloadKind | None, min_gpu_memory_gb: float,
                  quantization: str | None) -> dict[str, Any]:
    """What the version needs to run (``control.requirements``), from the stack config; a model
    that is not in models.yaml needs ``--kind``."""
    from control.requirements import runtime_requirements

    config: StackConfig | None
    try:
        config = load_stack_config(paths.pools_file, paths.models_file)
    except ConfigError:
        if kind is None:
            raise
        config = None
    if kind is None and (config is None or config.model(name) is None):
        raise typer.BadParameter(f"model {name!r} is not in {paths.models_file}; say its kind", param_hint="--kind")
    requirements = runtime_requirements(config, name, kind, min_gpu_memory_gb, quantization)
    return {**asdict(requirements), "gpu_types": list(requirements.gpu_types)}


def _upload(store: ArtifactStore, directory: Path, name: str, version: int, reuse: bool) -> str:
    """Upload with a progress bar (bytes, MB/s); the stored copy's URI if ``reuse`` and it exists."""
    from control.artifacts import ArtifactExistsError

    total = sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())
    columns = (TextColumn("[bold]uploading"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    try:
        with Progress(*columns, console=console) as progress:
            task = progress.add_task("upload", total=total)
            return store.upload_directory(directory, name, version,
                                          progress=lambda sent: progress.advance(task, sent))
    except ArtifactExistsError as exc:
        if not reuse:
            raise ArtifactExistsError(f"{exc}; versions are immutable: push another --version, or pass "
                                      "--reuse-upload to register the stored copy") from exc
        console.print(f"[yellow]{escape(str(exc))}[/]: registering the stored copy (control verifies it)")
        return store.uri_for(name, version)


@models_app.command("push")
def push(
    directory: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="artifact folder to sign and push")],
    name: Annotated[str, typer.Option(help="model name")],
    version: Annotated[int, typer.Option(min=0, help="version number to register")],
    kind: Annotated[WorkloadKind | None, typer.Option(help="workload kind (default: the model's in models.yaml)")]
    = None,
    key: Annotated[Path | None, typer.Option(help="signing key (default: control.yaml local_signing_key)")] = None,
    store: Annotated[str | None, typer.Option(help="artifact store URL (default: control.yaml artifact_store)")]
    = None,
    min_gpu_memory_gb: Annotated[float, typer.Option(min=0, help="GPU memory the version needs")] = 0.0,
    quantization: Annotated[str | None, typer.Option(help="quantization of the weights, if any")] = None,
    reuse_upload: Annotated[bool, typer.Option(
        "--reuse-upload", help="register the copy already stored (after a push whose registration failed)")] = False,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
    config_dir: ConfigDir = StackPaths.config_dir,
    actor: Actor = None,
) -> None:
    """Sign DIRECTORY (manifest + signature written into it), upload it and register the version."""
    from control.artifacts import open_store
    from control.integrity import load_private_key, write_signed_manifest

    paths = _paths(config_dir, state_dir)
    with operator_errors():
        settings = load_control_settings(paths.control_file, paths.state_dir)
        requirements = _requirements(paths, name, kind, min_gpu_memory_gb, quantization)
        with _client(paths.state_dir, control_url, actor) as client:
            client.list_models()  # fail before hashing and uploading if control is down or refuses the token
            private_key = load_private_key(key or settings.local_signing_key)
            with console.status(f"hashing and signing {directory}…"):
                manifest = write_signed_manifest(directory, name, version, private_key)
            console.print(f"signed {len(manifest.files)} file(s), {manifest.total_bytes} bytes; "
                          f"manifest digest {manifest.digest()}")
            uri = _upload(open_store(store or settings.artifact_store), directory, name, version, reuse_upload)
            with console.status("control is downloading and verifying the artifact…"):
                registered = client.register_version(name, version, uri, requirements, reason)
    console.print(version_table(registered))


@models_app.command("list")
def models_list(control_url: ControlUrl = DEFAULT_CONTROL_URL, state_dir: StateDir = StackPaths.state_dir,
                actor: Actor = None) -> None:
    """Models, their versions with states, and the live traffic weights."""
    with operator_errors(), _client(state_dir, control_url, actor) as client:
        models = client.list_models()
    console.print(models_table(models))


@rollout_app.command("start")
def rollout_start(
    model: ModelArg,
    to: Annotated[int, typer.Option(min=0, help="candidate version")],
    canary: Annotated[float, typer.Option(min=0, max=100, help="percent of traffic to the candidate")],
    sticky: Sticky = StickyMode.REQUEST,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
    actor: Actor = None,
) -> None:
    """Start a canary: load version TO and send it CANARY percent of MODEL's traffic."""
    with (operator_errors(), _client(state_dir, control_url, actor) as client,
          console.status(f"loading v{to} and shifting {canary:g}% of {model}…")):
        result = client.start_canary(model, to, canary, sticky.value, reason)
    print_status(result)


def _action_command(action: str, summary: str) -> Callable[..., None]:
    def command(model: ModelArg, reason: Reason = "", control_url: ControlUrl = DEFAULT_CONTROL_URL,
                state_dir: StateDir = StackPaths.state_dir, actor: Actor = None) -> None:
        with (operator_errors(), _client(state_dir, control_url, actor) as client,
              console.status(f"{action} {model}: waiting for control…")):
            result = client.rollout_action(model, action, reason)
        print_status(result)

    command.__doc__ = summary
    return command


_ACTION_SUMMARIES = {
    "promote": "Finish the rollout: the candidate takes all of MODEL's traffic.",
    "pause": "Hold the rollout at its current weights.",
    "resume": "Continue a paused rollout.",
    "rollback": "Send all of MODEL's traffic back to the baseline version.",
}
for _action in ROLLOUT_ACTIONS:
    rollout_app.command(_action)(_action_command(_action, _ACTION_SUMMARIES[_action]))


def status(model: ModelArg, control_url: ControlUrl = DEFAULT_CONTROL_URL,
           state_dir: StateDir = StackPaths.state_dir, actor: Actor = None) -> None:
    """Alias weights, the rollout, per-version window metrics and the last verdict."""
    with operator_errors(), _client(state_dir, control_url, actor) as client:
        result = client.rollout_status(model)
    print_status(result)


rollout_app.command("status")(status)
ab_app.command("status")(status)


@ab_app.command("start")
def ab_start(
    model: ModelArg,
    variants: Annotated[str, typer.Option(help="VERSION:WEIGHT pairs, integer weights summing to 100, e.g. 2:50,3:50")],
    sticky: Sticky = StickyMode.TENANT,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
    actor: Actor = None,
) -> None:
    """Split MODEL's traffic between versions by the given weights."""
    try:
        weights = parse_variants(variants)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--variants") from exc
    with (operator_errors(), _client(state_dir, control_url, actor) as client,
          console.status(f"loading {', '.join(f'v{v}' for v in weights)} and splitting {model}…")):
        result = client.start_ab(model, weights, sticky.value, reason)
    print_status(result)


@keys_app.command("generate")
def keys_generate(
    name: Annotated[str, typer.Argument(help="key name: writes <state>/keys/NAME.key and NAME.pub")],
    trust: Annotated[bool, typer.Option("--trust/--no-trust", help="copy NAME.pub among the keys control "
                                                                   "trusts (control.yaml trusted_keys_dir)")]
    = False,
    state_dir: StateDir = StackPaths.state_dir,
    config_dir: ConfigDir = StackPaths.config_dir,
) -> None:
    """Generate an ed25519 signing key pair and print its key id."""
    from control.integrity import generate_keypair

    if not _KEY_NAME.match(name):
        raise typer.BadParameter("use letters, digits, '.', '_' or '-' (64 at most)", param_hint="NAME")
    paths = _paths(config_dir, state_dir)
    private, public = paths.state_dir / "keys" / f"{name}.key", paths.state_dir / "keys" / f"{name}.pub"
    with operator_errors():
        trusted = load_control_settings(paths.control_file, paths.state_dir).trusted_keys_dir / public.name
        for path in (private, public, *((trusted,) if trust else ())):
            if path.exists():
                raise FileExistsError(f"{path} already exists; choose another key name")
        kid = generate_keypair(private, public)
        if trust:
            trusted.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(public, trusted)
    console.print(f"key id [bold]{kid}[/]\nprivate key {escape(str(private))} (mode 0600)\n"
                  f"public key {escape(str(public))}")
    console.print(f"trusted: copied to {escape(str(trusted))}" if trust else
                  f"not trusted: copy {escape(public.name)} into {escape(str(trusted.parent))} to trust it")


def audit(
    model: Annotated[str | None, typer.Option(help="only entries about this model")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="most entries to show")] = 50,
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
    actor: Actor = None,
) -> None:
    """The control plane's audit log, newest first."""
    with operator_errors(), _client(state_dir, control_url, actor) as client:
        entries = client.audit(model, limit)
    console.print(audit_table(entries))
