"""The capacity controller's operator settings in the registry database, so that they outlive a
control restart: the bounds an operator set with ``shunter scale set`` (they replace
capacity.yaml's for that pool and model) and the live overrides of ``shunter scale override``.

``CapacitySettingsStore`` is a mixin of ``Registry``: each change runs in one transaction with its
audit entry (``capacity.set``, ``capacity.override``, ``capacity.override_expired``), as every
registry change does. Reads return frozen records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.registry import queries as q
from control.registry.errors import RegistryValidationError
from control.registry.schema import CapacityBoundsRow, CapacityOverrideRow


@dataclass(frozen=True)
class CapacityBoundsRecord:
    pool: str
    model: str
    min_replicas: int
    max_replicas: int
    updated_at: float
    updated_by: str


@dataclass(frozen=True)
class CapacityOverrideRecord:
    pool: str
    model: str
    replicas: int
    expires_at_s: float
    reason: str
    actor: str


class CapacitySettingsStore:
    """The capacity part of ``Registry`` (which provides the sessions and the clock)."""

    _read: sessionmaker[Session]
    _write: sessionmaker[Session]
    _clock: Callable[[], float]

    def set_capacity_bounds(self, pool: str, model: str, min_replicas: int, max_replicas: int, actor: str,
                            reason: str = "", details: q.Details = None) -> CapacityBoundsRecord:
        """Store the bounds of (``pool``, ``model``) with audit ``capacity.set`` (``details`` added)."""
        q.text("pool", pool), q.text("model", model), q.text("actor", actor)
        if q.count("min_replicas", min_replicas) > q.count("max_replicas", max_replicas):
            raise RegistryValidationError(f"min_replicas {min_replicas} > max_replicas {max_replicas}")
        with self._write.begin() as session:
            row = session.get(CapacityBoundsRow, (pool, model), with_for_update=True)
            if row is None:
                row = CapacityBoundsRow(pool=pool, model=model)
                session.add(row)
            row.min_replicas, row.max_replicas, row.updated_by = min_replicas, max_replicas, actor
            row.updated_at = now = self._clock()
            q.append_audit(session, now, actor, "capacity.set", model, reason, q.merge(details, pool=pool))
            return _bounds(row)

    def capacity_bounds(self) -> list[CapacityBoundsRecord]:
        with self._read() as session:
            return [_bounds(row) for row in session.scalars(select(CapacityBoundsRow))]

    def put_capacity_override(self, pool: str, model: str, replicas: int, expires_at_s: float, actor: str,
                              reason: str) -> CapacityOverrideRecord:
        """Store (or replace) the override of (``pool``, ``model``) with audit ``capacity.override``."""
        q.text("pool", pool), q.text("model", model), q.text("actor", actor), q.text("reason", reason)
        q.count("replicas", replicas)
        with self._write.begin() as session:
            row = session.get(CapacityOverrideRow, (pool, model), with_for_update=True)
            if row is None:
                row = CapacityOverrideRow(pool=pool, model=model)
                session.add(row)
            row.replicas, row.expires_at, row.reason, row.actor = replicas, expires_at_s, reason, actor
            row.created_at = now = self._clock()
            record = _override(row)
            q.append_audit(session, now, actor, "capacity.override", model, reason,
                           q.merge(None, pool=pool, replicas=replicas, expires_at_s=expires_at_s, reason=reason,
                                   actor=actor))
            return record

    def expire_capacity_override(self, pool: str, model: str, actor: str) -> CapacityOverrideRecord | None:
        """Delete the override of (``pool``, ``model``) with audit ``capacity.override_expired``;
        None (and no entry) when there is none."""
        with self._write.begin() as session:
            row = session.get(CapacityOverrideRow, (pool, model), with_for_update=True)
            if row is None:
                return None
            record = _override(row)
            session.delete(row)
            q.append_audit(session, self._clock(), actor, "capacity.override_expired", model, record.reason,
                           q.merge(None, pool=pool, replicas=record.replicas, expires_at_s=record.expires_at_s,
                                   reason=record.reason, actor=record.actor))
            return record

    def capacity_overrides(self) -> list[CapacityOverrideRecord]:
        with self._read() as session:
            return [_override(row) for row in session.scalars(select(CapacityOverrideRow))]


def _bounds(row: CapacityBoundsRow) -> CapacityBoundsRecord:
    return CapacityBoundsRecord(row.pool, row.model, row.min_replicas, row.max_replicas, row.updated_at,
                                row.updated_by)


def _override(row: CapacityOverrideRow) -> CapacityOverrideRecord:
    return CapacityOverrideRecord(row.pool, row.model, row.replicas, row.expires_at, row.reason, row.actor)
