"""Operator commands of the control plane (registered by ``cli.main``).

``shunter models push|list``, ``shunter rollout start|promote|pause|resume|rollback|status``,
``shunter ab start|status``, ``shunter keys generate`` and ``shunter audit``. Every command but
``keys generate`` talks to the control admin API through ``cli.admin_client.AdminClient``
with the operator's token: ``$SHUNTER_TOKEN`` (a token from ``shunter tokens create``), else the
bootstrap admin token in ``<state>/admin.token``; control audits under that token's name.
Expected failures (integrity, artifact store, configuration, the API) are printed in red with
their code and exit with status 1, never a traceback; malformed arguments are usage errors
(status 2). The control plane's artifact, signing and requirements code is imported by the
commands that use it (``push``, ``keys generate``), so the commands that only call the admin API
start without it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.admin_client import DEFAULT_CONTROL_URL, ROLLOUT_ACTIONS, AdminApiError, AdminClient
from cli.tables import (
    audit_table,
    keys_table,
    models_table,
    output_console,
    prune_table,
    status_renderables,
    version_table,
)
from control.errors import ControlError
from settings.kinds import WorkloadKind
from settings.paths import StackPaths, admin_token

if TYPE_CHECKING:
    from control.artifacts import ArtifactStore

models_app = typer.Typer(help="Model versions in the registry: push signed artifacts, list them.",
                         no_args_is_help=True)
rollout_app = typer.Typer(help="Canary rollouts: start, promote, pause, resume, roll back, show status.",
                          no_args_is_help=True)
ab_app = typer.Typer(help="A/B tests between versions (pause, promote or roll back with `shunter rollout`).",
                     no_args_is_help=True)
keys_app = typer.Typer(help="ed25519 keys that sign artifacts.", no_args_is_help=True)
console = output_console()
err_console = output_console(stderr=True)

_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VARIANT = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


class StickyMode(StrEnum):
    REQUEST = "request"
    TENANT = "tenant"
    USER = "user"  # the end user named by the x-shunter-user request header (else the tenant)


ConfigDir = Annotated[Path, typer.Option(help="folder with pools.yaml, models.yaml, control.yaml")]
StateDir = Annotated[Path, typer.Option(help="folder for artifacts, logs, keys and state")]
ControlUrl = Annotated[str, typer.Option(help="control API base URL")]
Reason = Annotated[str, typer.Option(help="why, for the audit log")]
ModelArg = Annotated[str, typer.Argument(help="model name")]
Sticky = Annotated[StickyMode, typer.Option(help="what keeps a caller on one version")]
JsonOutput = Annotated[bool, typer.Option("--json", help="print the API's JSON, for scripts")]


def _paths(config_dir: Path, state_dir: Path) -> StackPaths:
    return StackPaths(config_dir=config_dir.resolve(), state_dir=state_dir.resolve())


TOKEN_ENV = "SHUNTER_TOKEN"


def operator_token(state_dir: Path) -> str:
    """The operator's own token (``$SHUNTER_TOKEN``), else the bootstrap admin token of ``state_dir``."""
    return os.environ.get(TOKEN_ENV, "").strip() or admin_token(_paths(StackPaths.config_dir, state_dir))


def _client(state_dir: Path, control_url: str) -> AdminClient:
    return AdminClient(control_url, operator_token(state_dir))


def _error_code(exc: Exception) -> str:
    if isinstance(exc, AdminApiError):  # the common case, answered before the imports below
        return f"{exc.code}, HTTP {exc.status}" if exc.status else exc.code
    from control.artifact_layout import ArtifactLayoutError
    from control.artifacts import ArtifactExistsError, ArtifactStoreError
    from control.integrity import IntegrityError
    from settings.base import ConfigError

    if isinstance(exc, IntegrityError | ArtifactLayoutError):
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
        err_console.print(f"[bold red]error[/] [red]({escape(_error_code(exc))})[/]: {escape(str(exc))}",
                          soft_wrap=True)  # one line, whatever its length: operators grep for the code
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
                  quantization: str | None, directory: Path) -> dict[str, Any]:
    """What the version needs to run (``control.requirements``), from the stack config. Control
    registers versions of configured models only, so an unknown name is an error that lists the
    configured ones; ``--kind`` must agree with the configured kind, and DIRECTORY's files must
    fit the kind's layout (``control.artifact_layout``)."""
    from control.artifact_layout import artifact_files, check_layout
    from control.requirements import runtime_requirements
    from settings.stack import load_stack_config

    config = load_stack_config(paths.pools_file, paths.models_file)
    spec = config.model(name)
    if spec is None:
        known = ", ".join(sorted(model.name for model in config.models))
        raise typer.BadParameter(f"no model named {name!r} in {paths.models_file}; known models: {known}",
                                 param_hint="--name")
    if kind is not None and kind is not spec.kind:
        raise typer.BadParameter(f"{name} is a {spec.kind.value} model in {paths.models_file}, not {kind.value}",
                                 param_hint="--kind")
    check_layout(spec, artifact_files(directory))
    requirements = runtime_requirements(config, name, None, min_gpu_memory_gb, quantization)
    return {**asdict(requirements), "gpu_types": list(requirements.gpu_types)}


def _check_version_is_free(client: AdminClient, store: ArtifactStore, name: str, version: int, reuse: bool) -> None:
    """Refuse, before anything is signed or uploaded, a version the registry already has, or one
    the store already holds (unless ``--reuse-upload``)."""
    from control.artifacts import ArtifactExistsError

    registered = {int(v["version"]) for v in client.versions(name)}
    if version in registered:
        raise AdminApiError(409, "version_exists", f"{name} v{version} is already registered; versions are "
                                                   f"immutable: push v{max(registered) + 1}")
    if store.exists(name, version) and not reuse:
        raise ArtifactExistsError(f"{name} v{version} is already stored at {store.uri_for(name, version)} but "
                                  "not registered; pass --reuse-upload to register that copy")


def _upload(store: ArtifactStore, directory: Path, name: str, version: int, reuse: bool) -> str:
    """Upload with a progress bar (bytes, MB/s); the stored copy's URI if ``reuse`` and it exists."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    if reuse and store.exists(name, version):
        console.print(f"{name} v{version} is already stored: registering that copy (control verifies it)")
        return store.uri_for(name, version)
    total = sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())
    columns = (TextColumn("[bold]uploading"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("upload", total=total)
        return store.upload_directory(directory, name, version, progress=lambda sent: progress.advance(task, sent))


@models_app.command("push")
def push(
    directory: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="artifact folder to sign and push")],
    name: Annotated[str, typer.Option(help="model name")],
    version: Annotated[int, typer.Option(min=1, help="version number to register")],
    kind: Annotated[WorkloadKind | None, typer.Option(help="workload kind (checked against models.yaml)")]
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
) -> None:
    """Check DIRECTORY against the kind's artifact layout, sign a copy, upload it and register the
    version. DIRECTORY is not written to;
    a push that control refuses (an untrusted key, a bad manifest) leaves nothing stored."""
    from control.artifacts import open_store
    from control.integrity import load_private_key
    from control.signed_copy import signed_copy
    from settings.control import load_control_settings

    paths = _paths(config_dir, state_dir)
    with operator_errors():
        settings = load_control_settings(paths.control_file, paths.state_dir)
        requirements = _requirements(paths, name, kind, min_gpu_memory_gb, quantization, directory)
        artifact_store = open_store(store or settings.artifact_store)
        with _client(paths.state_dir, control_url) as client:
            _check_version_is_free(client, artifact_store, name, version, reuse_upload)
            private_key = load_private_key(key or settings.local_signing_key)
            console.print(f"hashing and signing a copy of {escape(str(directory))}…")
            with signed_copy(directory, name, version, private_key) as (staged, manifest):
                console.print(f"signed {len(manifest.files)} file(s), {manifest.total_bytes} bytes; "
                              f"manifest digest {manifest.digest()}")
                uri = _upload(artifact_store, staged, name, version, reuse_upload)
            registered = _register_or_remove(client, artifact_store, name, version, uri, requirements, reason)
    console.print(version_table(registered))


def _register_or_remove(client: AdminClient, store: ArtifactStore, name: str, version: int, uri: str,
                        requirements: dict[str, Any], reason: str) -> dict[str, Any]:
    """Register the stored copy; when control refuses it (4xx), delete the copy so that the version
    number stays free, and re-raise. A network failure leaves the copy for ``--reuse-upload``."""
    try:
        with console.status("control is downloading and verifying the artifact…"):
            return client.register_version(name, version, uri, requirements, reason)
    except AdminApiError as exc:
        if 400 <= exc.status < 500 and exc.code != "version_exists":
            store.delete(name, version)
            exc.message = f"{exc.message} (the upload was removed: v{version} is still free)"
            exc.args = (exc.message,)
        raise


@models_app.command("list")
def models_list(json_output: JsonOutput = False, control_url: ControlUrl = DEFAULT_CONTROL_URL,
                state_dir: StateDir = StackPaths.state_dir) -> None:
    """Models, their versions with states, and the live traffic weights."""
    with operator_errors(), _client(state_dir, control_url) as client:
        models = client.list_models()
    if json_output:
        console.print_json(data=models)
        return
    console.print(models_table(models))


@models_app.command("delete")
def models_delete(
    model: ModelArg,
    version: Annotated[int, typer.Argument(min=1, help="a version that never served")],
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Delete a version that never served: its record, stored artifact and verified copy."""
    with operator_errors(), _client(state_dir, control_url) as client:
        freed = client.delete_version(model, version, reason)
    console.print(f"deleted {escape(model)} v{version}: stored artifact "
                  f"{'deleted' if freed['store_deleted'] else 'kept (stored elsewhere)'}, "
                  f"{freed['verified_bytes'] / 1e6:.1f} MB of verified copy freed")


@models_app.command("prune")
def models_prune(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would be deleted")] = False,
    json_output: JsonOutput = False,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Delete the stored artifacts and verified copies of retired and failed versions (their
    records stay), keeping the version `rollout undo` would bring back."""
    with operator_errors(), _client(state_dir, control_url) as client:
        result = client.prune(dry_run, reason)
    if json_output:
        console.print_json(data=result)
        return
    console.print(prune_table(result))


@rollout_app.command("start")
def rollout_start(
    model: ModelArg,
    to: Annotated[int, typer.Option(min=0, help="candidate version")],
    canary: Annotated[float, typer.Option(min=0, max=100, help="percent of traffic to the candidate")],
    sticky: Sticky = StickyMode.REQUEST,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Start a canary: load version TO and send it CANARY percent of MODEL's traffic."""
    with (operator_errors(), _client(state_dir, control_url) as client,
          console.status(f"loading v{to} and shifting {canary:g}% of {model}…")):
        result = client.start_canary(model, to, canary, sticky.value, reason)
    print_status(result)


def _action_command(action: str, summary: str) -> Callable[..., None]:
    def command(model: ModelArg, reason: Reason = "", control_url: ControlUrl = DEFAULT_CONTROL_URL,
                state_dir: StateDir = StackPaths.state_dir) -> None:
        with (operator_errors(), _client(state_dir, control_url) as client,
              console.status(f"{action} {model}: waiting for control…")):
            result = client.rollout_action(model, action, reason)
        print_status(result)

    command.__doc__ = summary
    return command


_ACTION_SUMMARIES = {
    "pause": "Hold the rollout at its current weights.",
    "resume": "Continue a paused rollout.",
    "rollback": "Send all of MODEL's traffic back to the baseline version.",
}
for _action in ROLLOUT_ACTIONS:
    rollout_app.command(_action)(_action_command(_action, _ACTION_SUMMARIES[_action]))


@rollout_app.command("promote")
def rollout_promote(
    model: ModelArg,
    to: Annotated[int | None, typer.Option(min=1, help="the version that wins (an A/B test's winner; "
                                                       "default: the candidate)")] = None,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Finish the rollout: the candidate (or --to N) takes all of MODEL's traffic; the others drain."""
    with (operator_errors(), _client(state_dir, control_url) as client,
          console.status(f"promote {model}: moving traffic and draining…")):
        result = client.promote(model, to, reason)
    print_status(result)


@rollout_app.command("undo")
def rollout_undo(
    model: ModelArg,
    to: Annotated[int | None, typer.Option(min=1, help="version to bring back (default: the one live before "
                                                       "the last promote)")] = None,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Bring back MODEL's previous live version at any time after a rollout ended; it is loaded and
    warmed before traffic moves, and the replaced version drains before it is unloaded."""
    target = f"v{to}" if to is not None else "the previous version"
    with (operator_errors(), _client(state_dir, control_url) as client,
          console.status(f"undo {model}: loading {target}, moving traffic, draining…")):
        result = client.undo(model, to, reason)
    print_status(result)


def status(model: ModelArg, json_output: JsonOutput = False, control_url: ControlUrl = DEFAULT_CONTROL_URL,
           state_dir: StateDir = StackPaths.state_dir) -> None:
    """Alias weights, the rollout, per-version window metrics and the last verdict."""
    with operator_errors(), _client(state_dir, control_url) as client:
        result = client.rollout_status(model)
    if json_output:
        console.print_json(data=result)
        return
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
) -> None:
    """Split MODEL's traffic between versions by the given weights."""
    try:
        weights = parse_variants(variants)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--variants") from exc
    with (operator_errors(), _client(state_dir, control_url) as client,
          console.status(f"loading {', '.join(f'v{v}' for v in weights)} and splitting {model}…")):
        result = client.start_ab(model, weights, sticky.value, reason)
    print_status(result)


@keys_app.command("generate")
def keys_generate(
    name: Annotated[str, typer.Argument(help="key name: writes <state>/keys/NAME.key and NAME.pub")],
    trust: Annotated[bool, typer.Option("--trust/--no-trust", help="have control trust NAME.pub at once "
                                                                   "(through the admin API, audited)")]
    = False,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
    config_dir: ConfigDir = StackPaths.config_dir,
) -> None:
    """Generate an ed25519 signing key pair and print its key id; with --trust, control trusts it."""
    from control.integrity import generate_keypair

    if not _KEY_NAME.match(name):
        raise typer.BadParameter("use letters, digits, '.', '_' or '-' (64 at most)", param_hint="NAME")
    paths = _paths(config_dir, state_dir)
    private, public = paths.state_dir / "keys" / f"{name}.key", paths.state_dir / "keys" / f"{name}.pub"
    with operator_errors():
        for path in (private, public):
            if path.exists():
                raise FileExistsError(f"{path} already exists; choose another key name")
        kid = generate_keypair(private, public)
        console.print(f"key id [bold]{kid}[/]\nprivate key {escape(str(private))} (mode 0600)\n"
                      f"public key {escape(str(public))}")
        if not trust:
            console.print(f"not trusted yet: `shunter keys trust {escape(name)}` makes control trust it")
            return
        with _client(paths.state_dir, control_url) as client:
            client.trust_key(name, public.read_text(), reason)
    console.print(f"trusted by control as [bold]{escape(name)}[/] (takes effect at once)")


@keys_app.command("trust")
def keys_trust(
    name: Annotated[str, typer.Argument(help="key name: <state>/keys/NAME.pub, or --public-key")],
    public_key: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, help="PEM public key file")]
    = None,
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Have control trust a public key (effective at once, audited)."""
    if not _KEY_NAME.match(name):
        raise typer.BadParameter("use letters, digits, '.', '_' or '-' (64 at most)", param_hint="NAME")
    path = public_key or state_dir.resolve() / "keys" / f"{name}.pub"
    with operator_errors(), _client(state_dir, control_url) as client:
        result = client.trust_key(name, path.read_text(), reason)
    console.print(f"trusted [bold]{escape(name)}[/] (key id {result['key_id']})"
                  + ("" if result["changed"] else ": it already was"))


@keys_app.command("untrust")
def keys_untrust(
    name: Annotated[str, typer.Argument(help="name of a trusted key (see `shunter keys list`)")],
    reason: Reason = "",
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """Stop trusting a key: registrations signed by it are refused from now on (audited)."""
    with operator_errors(), _client(state_dir, control_url) as client:
        result = client.untrust_key(name, reason)
    console.print(f"no longer trusted: [bold]{escape(name)}[/] (key id {', '.join(result['key_id'])})")


@keys_app.command("list")
def keys_list(
    json_output: JsonOutput = False,
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """The keys control trusts."""
    with operator_errors(), _client(state_dir, control_url) as client:
        keys = client.trusted_keys()
    if json_output:
        console.print_json(data=keys)
        return
    console.print(keys_table(keys))


def audit(
    model: Annotated[str | None, typer.Option(help="only entries about this model")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="most entries to show")] = 50,
    json_output: JsonOutput = False,
    control_url: ControlUrl = DEFAULT_CONTROL_URL,
    state_dir: StateDir = StackPaths.state_dir,
) -> None:
    """The control plane's audit log, newest first."""
    with operator_errors(), _client(state_dir, control_url) as client:
        entries = client.audit(model, limit)
    if json_output:
        console.print_json(data=entries)
        return
    console.print(audit_table(entries))
