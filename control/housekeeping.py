"""Housekeeping of the artifact store and the verified copies: delete a version that never served,
prune what retired and failed versions left behind.

``delete_unserved(plane, model, version, actor, reason)`` removes a version that never reached
``ready`` (the audit log holds every state change): its registry record, its stored artifact and
its verified copy. A version that served once is history (audits, rollouts name it) and is pruned
instead. ``prune(plane, actor, reason, dry_run)`` frees the space of every ``retired`` or ``failed``
version (its stored artifact and verified copy; the record stays, its state reason says pruned),
except the version ``shunter rollout undo`` would bring back for each model, and removes verified
copies that no registered version names. Only artifacts stored where this plane's store keeps
versions (``store.uri_for``) are deleted: a version registered from another location is left alone.
Every deletion is audited (``version.delete``, ``version.pruned`` with the bytes freed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from control.control_plane import ControlPlane
from control.errors import ControlError
from control.registry import VersionRecord, VersionState
from control.rollouts import RolloutError

PRUNABLE_STATES = (VersionState.RETIRED, VersionState.FAILED)


class HousekeepingError(ControlError):
    """A deletion that would lose something still needed; ``code`` says what."""

    def __init__(self, code: str, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.code, self.status = code, status


@dataclass(frozen=True)
class Freed:
    """What one deletion removed."""

    model: str
    version: int | None  # None: a verified copy that no registered version names
    store_deleted: bool
    verified_bytes: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def ever_served(plane: ControlPlane, model: str, version: int) -> bool:
    """Whether ``version`` of ``model`` was ever ``ready`` (loaded and warmed on the workers)."""
    for entry in plane.registry.audit_log(subject=model, action_prefix="version.state", limit=10_000):
        details = entry.details or {}
        if details.get("version") == version and details.get("new_state") == VersionState.READY.value:
            return True
    return False


def _free(plane: ControlPlane, record: VersionRecord, dry_run: bool) -> Freed:
    digests = {v.manifest_digest for m in plane.registry.models() for v in plane.registry.versions(m)
               if (v.model, v.version) != (record.model, record.version)}
    in_store = record.artifact_uri == plane.store.uri_for(record.model, record.version)
    copy_path = plane.deployer.copies.root / record.manifest_digest
    shared = record.manifest_digest in digests
    verified_bytes = 0 if shared or not copy_path.is_dir() else sum(
        p.stat().st_size for p in copy_path.rglob("*") if p.is_file())
    if not dry_run:
        if in_store:
            plane.store.delete(record.model, record.version)
        if not shared:
            plane.deployer.copies.remove(record.manifest_digest)
    return Freed(record.model, record.version, in_store, verified_bytes)


def delete_unserved(plane: ControlPlane, model: str, version: int, actor: str, reason: str) -> Freed:
    record = plane.registry.version(model, version)
    if record is None:
        raise HousekeepingError("not_registered", f"{model} v{version} is not registered", 404)
    if ever_served(plane, model, version):
        raise HousekeepingError("served_before", f"{model} v{version} has served traffic; its record is history: "
                                                 "`shunter models prune` frees its space instead")
    with plane.rollouts.lock(model):
        plane.registry.delete_version(model, version, actor, reason)
        return _free(plane, record, dry_run=False)


def _undo_target(plane: ControlPlane, model: str) -> int | None:
    alias = plane.registry.alias(model)
    live = [v for v, w in (alias.weights if alias else {}).items() if w > 0]
    if len(live) != 1:
        return None
    try:
        return plane.rollouts.previous_version(model, live[0])
    except RolloutError:
        return None


def prune(plane: ControlPlane, actor: str, reason: str, dry_run: bool) -> list[Freed]:
    """Free the space of retired and failed versions and of orphaned verified copies; see the module docstring."""
    freed: list[Freed] = []
    for model in plane.registry.models():
        keep = _undo_target(plane, model)
        for record in plane.registry.versions(model):
            if record.state not in PRUNABLE_STATES or record.version == keep:
                continue
            if not plane.store.exists(model, record.version) and not (
                    plane.deployer.copies.root / record.manifest_digest).is_dir():
                continue  # pruned before
            with plane.rollouts.lock(model):
                result = _free(plane, record, dry_run)
            freed.append(result)
            if not dry_run:
                plane.registry.audit(actor, "version.pruned", model, reason, {"version": record.version,
                                                                             **result.as_dict()})
    named = {v.manifest_digest for m in plane.registry.models() for v in plane.registry.versions(m)}
    for digest in sorted(plane.deployer.copies.digests() - named):
        path = plane.deployer.copies.root / digest
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if not dry_run:
            plane.deployer.copies.remove(digest)
        freed.append(Freed("", None, False, size))
    return freed
