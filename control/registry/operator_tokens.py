"""Operator tokens in the registry: who may call the admin API, with which role.

Only the SHA-256 of a token is stored (tokens are 256-bit random strings, so a fast hash is
enough: there is nothing to guess). Creating and revoking a token runs in one transaction with
its audit entry (``token.create`` / ``token.revoke``, subject ``token:<name>``, details with the
role), like every other registry change. ``Registry`` inherits these methods.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.registry import queries as q
from control.registry.errors import RegistryConflictError, RegistryNotFoundError, RegistryValidationError
from control.registry.schema import OperatorTokenRow

TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class Role(StrEnum):
    """What a token may do; each role may do everything the ones before it may."""

    VIEWER = "viewer"  # read: models, versions, rollouts, audit, keys, capacity, workers
    OPERATOR = "operator"  # and change: push, rollouts, undo, prune, delete, scale
    ADMIN = "admin"  # and manage trusted keys and operator tokens

    def allows(self, needed: Role) -> bool:
        order = list(Role)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True, slots=True)
class OperatorToken:
    """A stored token, without its hash."""

    name: str
    role: Role
    created_at: float
    created_by: str


def _record(row: OperatorTokenRow) -> OperatorToken:
    return OperatorToken(row.name, Role(row.role), row.created_at, row.created_by)


class OperatorTokens:
    """The registry's operator-token methods (mixed into ``Registry``)."""

    _clock: Callable[[], float]
    _read: sessionmaker[Session]
    _write: sessionmaker[Session]

    def create_operator_token(self, name: str, role: Role, token_sha256: str, actor: str,
                              reason: str = "") -> OperatorToken:
        """Store token ``name`` with ``role`` (audit ``token.create``). Raises RegistryValidationError
        for a malformed name or hash, RegistryConflictError if the name is taken."""
        if not isinstance(name, str) or not TOKEN_NAME.match(name):
            raise RegistryValidationError(f"token name must be 1-64 letters, digits, '.', '_', '@' or '-', "
                                          f"starting with a letter or digit; got {name!r}")
        if not isinstance(token_sha256, str) or not SHA256_HEX.match(token_sha256):
            raise RegistryValidationError("token_sha256 must be 64 lowercase hex digits")
        role = q.parse_enum(Role, role, "role")
        with self._write.begin() as session:
            if session.get(OperatorTokenRow, name) is not None:
                raise RegistryConflictError(f"a token named {name!r} exists; revoke it first")
            now = self._clock()
            row = OperatorTokenRow(name=name, role=role.value, token_sha256=token_sha256, created_at=now,
                                   created_by=q.text("actor", actor))
            session.add(row)
            q.flush_or_conflict(session, f"a token named {name!r} exists")
            q.append_audit(session, now, actor, "token.create", f"token:{name}", reason, {"role": role.value})
            return _record(row)

    def operator_token(self, token_sha256: str) -> OperatorToken | None:
        """The token whose SHA-256 is ``token_sha256``, or None."""
        query = select(OperatorTokenRow).where(OperatorTokenRow.token_sha256 == token_sha256)
        with self._read() as session:
            row = session.scalars(query).first()
            return None if row is None else _record(row)

    def operator_tokens(self) -> list[OperatorToken]:
        """Every stored token, by name."""
        with self._read() as session:
            return [_record(row) for row in session.scalars(select(OperatorTokenRow).order_by(OperatorTokenRow.name))]

    def revoke_operator_token(self, name: str, actor: str, reason: str = "") -> OperatorToken:
        """Delete token ``name`` (audit ``token.revoke``); it stops working at once.
        Raises RegistryNotFoundError if there is none."""
        with self._write.begin() as session:
            row = session.get(OperatorTokenRow, name)
            if row is None:
                raise RegistryNotFoundError(f"no token named {name!r}")
            record = _record(row)
            session.delete(row)
            q.append_audit(session, self._clock(), actor, "token.revoke", f"token:{name}", reason,
                           {"role": record.role.value})
            return record
