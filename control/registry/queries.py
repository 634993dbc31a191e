"""The steps that the registry's transactions are made of, and its argument checks.

Each function takes the open ``Session`` of the caller's transaction; none commits. ``lock_*``
functions take a row lock on PostgreSQL (``SELECT ... FOR UPDATE``); on SQLite the registry's write
transactions already hold the database's write lock (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from control.registry import convert
from control.registry.errors import RegistryConflictError, RegistryNotFoundError, RegistryValidationError
from control.registry.records import ACTIVE_ROLLOUT_STATUSES
from control.registry.schema import AuditRow, DeploymentRow, ModelRow, RolloutRow, VersionRow

E = TypeVar("E", bound=StrEnum)
Details = Mapping[str, object] | None


def text(name: str, value: object) -> str:
    """``value`` if it is a non-empty string, else RegistryValidationError naming ``name``."""
    if not isinstance(value, str) or not value.strip():
        raise RegistryValidationError(f"{name} must be a non-empty string, got {value!r}")
    return value


def count(name: str, value: object) -> int:
    """``value`` if it is a non-negative int, else RegistryValidationError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RegistryValidationError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def positive(name: str, value: object) -> int:
    """``value`` if it is an int >= 1, else RegistryValidationError naming ``name``."""
    number = count(name, value)
    if number < 1:
        raise RegistryValidationError(f"{name} must be a positive integer, got {value!r}")
    return number


def parse_enum(enum: type[E], value: object, what: str) -> E:
    """``value`` as a member of ``enum``, else RegistryValidationError listing the allowed values."""
    allowed = ", ".join(member.value for member in enum)
    if not isinstance(value, str):
        raise RegistryValidationError(f"{what} must be one of {allowed}, got {value!r}")
    try:
        return enum(value)
    except ValueError:
        raise RegistryValidationError(f"{what} must be one of {allowed}, got {value!r}") from None


def merge(details: Details, **recorded: Any) -> dict[str, Any]:
    """The caller's audit details plus what the registry records itself (its keys win on a clash)."""
    return convert.json_details({**(details or {}), **recorded})


def deployment_values(row: DeploymentRow) -> dict[str, Any]:
    return {"pools": list(row.pools), "instances": row.instances, "min_warm_replicas": row.min_warm_replicas}


def append_audit(
    session: Session, at: float, actor: str, action: str, subject: str, reason: str, details: dict[str, Any]
) -> AuditRow:
    """Add one audit entry to the caller's transaction and flush it (so its id is known)."""
    if not isinstance(reason, str):
        raise RegistryValidationError(f"reason must be a string, got {reason!r}")
    row = AuditRow(
        at=at, actor=text("actor", actor), action=text("action", action), subject=text("subject", subject),
        reason=reason, details=details,
    )  # fmt: skip
    session.add(row)
    session.flush()
    return row


def model_for_write(session: Session, at: float, name: str, kind: str, actor: str) -> ModelRow:
    """The locked row of model ``name``, created with an audit entry (``model.create``) if missing.

    Raises RegistryConflictError if the model exists with another kind.
    """
    row = session.get(ModelRow, name, with_for_update=True)
    if row is None:
        try:
            with session.begin_nested():
                session.add(ModelRow(name=name, kind=kind, created_at=at))
        except IntegrityError:  # created concurrently (PostgreSQL): take theirs
            row = session.get(ModelRow, name, with_for_update=True, populate_existing=True)
        else:
            append_audit(session, at, actor, "model.create", name, "", {"kind": kind})
            row = session.get(ModelRow, name)
    if row is None:
        raise RegistryNotFoundError(f"model {name!r} could not be created")
    if row.kind != kind:
        raise RegistryConflictError(f"model {name!r} is of kind {row.kind!r}, not {kind!r}")
    return row


def lock_model(session: Session, name: str) -> ModelRow:
    """The locked row of model ``name``, else RegistryNotFoundError."""
    row = session.get(ModelRow, name, with_for_update=True)
    if row is None:
        raise RegistryNotFoundError(f"model {name!r} is not registered")
    return row


def version_row(session: Session, model: str, version: int, lock: bool = False) -> VersionRow | None:
    query = select(VersionRow).where(VersionRow.model == model, VersionRow.version == version)
    return session.scalar(query.with_for_update() if lock else query)


def require_versions(session: Session, model: str, versions: Iterable[int]) -> None:
    """RegistryNotFoundError naming every version of ``versions`` that ``model`` does not have."""
    wanted = set(versions)
    query = select(VersionRow.version).where(VersionRow.model == model, VersionRow.version.in_(wanted))
    missing = sorted(wanted - set(session.scalars(query)))
    if missing:
        raise RegistryNotFoundError(f"model {model!r} has no registered version {', '.join(map(str, missing))}")


def active_rollout_row(session: Session, model: str) -> RolloutRow | None:
    active = [status.value for status in ACTIVE_ROLLOUT_STATUSES]
    query = select(RolloutRow).where(RolloutRow.model == model, RolloutRow.status.in_(active))
    return session.scalar(query.order_by(RolloutRow.id.desc()).limit(1))


def flush_or_conflict(session: Session, conflict: str) -> None:
    """Flush; a unique-constraint violation becomes RegistryConflictError(``conflict``)."""
    try:
        session.flush()
    except IntegrityError as exc:
        raise RegistryConflictError(conflict) from exc
