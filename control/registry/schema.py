"""The registry's tables as SQLAlchemy 2.0 typed declarative classes.

These rows never leave ``control.registry``: the registry converts them to the frozen records of
``records.py``. JSON columns that are keyed by version number store the keys as strings (JSON object
keys are strings); the conversion turns them back into ints. Times are epoch seconds (double).

``migrations/versions/0001_initial.py`` creates the same tables by hand; a unit test compares the
two with alembic's autogenerate, so a change here needs a new migration.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Double, ForeignKey, Index, MetaData, String, Text, UniqueConstraint, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

NAME = String(255)
# Rows with these statuses are a model's active rollout; a partial unique index allows one.
ACTIVE_ROLLOUT_WHERE = "status IN ('running', 'paused')"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON, float: Double}


class ModelRow(Base):
    __tablename__ = "models"

    name: Mapped[str] = mapped_column(NAME, primary_key=True)
    kind: Mapped[str] = mapped_column(NAME)
    created_at: Mapped[float]


class VersionRow(Base):
    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(NAME, ForeignKey("models.name"))
    version: Mapped[int]
    artifact_uri: Mapped[str] = mapped_column(Text)
    manifest_digest: Mapped[str] = mapped_column(NAME)
    signer_key_id: Mapped[str] = mapped_column(NAME)
    requirements: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float]
    created_by: Mapped[str] = mapped_column(NAME)


class AliasRow(Base):
    __tablename__ = "aliases"

    model: Mapped[str] = mapped_column(NAME, ForeignKey("models.name"), primary_key=True)
    weights: Mapped[dict[str, Any]]
    sticky: Mapped[str] = mapped_column(String(16))
    generation: Mapped[int]
    updated_at: Mapped[float]


class DeploymentRow(Base):
    __tablename__ = "deployments"

    model: Mapped[str] = mapped_column(NAME, ForeignKey("models.name"), primary_key=True)
    pools: Mapped[list[str]]
    instances: Mapped[int]
    min_warm_replicas: Mapped[int]
    updated_at: Mapped[float]


class RolloutRow(Base):
    __tablename__ = "rollouts"
    __table_args__ = (
        Index("ix_rollouts_model_id", "model", "id"),
        Index(
            "uq_rollouts_one_active",
            "model",
            unique=True,
            sqlite_where=text(ACTIVE_ROLLOUT_WHERE),
            postgresql_where=text(ACTIVE_ROLLOUT_WHERE),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(NAME, ForeignKey("models.name"))
    kind: Mapped[str] = mapped_column(String(16))
    baseline_version: Mapped[int | None]
    variants: Mapped[dict[str, Any]]
    sticky: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    thresholds: Mapped[dict[str, Any]]
    started_at: Mapped[float]
    updated_at: Mapped[float]
    started_by: Mapped[str] = mapped_column(NAME)


class AuditRow(Base):
    """Append-only: the migration installs triggers that abort any UPDATE or DELETE."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_subject_id", "subject", "id"),
        Index("ix_audit_log_action", "action"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    at: Mapped[float]
    actor: Mapped[str] = mapped_column(NAME)
    action: Mapped[str] = mapped_column(NAME)
    subject: Mapped[str] = mapped_column(NAME)
    reason: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]]


class CapacityBoundsRow(Base):
    """An operator's ``shunter scale set`` for one (pool, model): it replaces capacity.yaml's bounds."""

    __tablename__ = "capacity_bounds"

    pool: Mapped[str] = mapped_column(NAME, primary_key=True)
    model: Mapped[str] = mapped_column(NAME, primary_key=True)
    min_replicas: Mapped[int]
    max_replicas: Mapped[int]
    updated_at: Mapped[float]
    updated_by: Mapped[str] = mapped_column(NAME)


class CapacityOverrideRow(Base):
    """An operator's live ``shunter scale override`` for one (pool, model); deleted when it expires."""

    __tablename__ = "capacity_overrides"

    pool: Mapped[str] = mapped_column(NAME, primary_key=True)
    model: Mapped[str] = mapped_column(NAME, primary_key=True)
    replicas: Mapped[int]
    expires_at: Mapped[float]
    reason: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(NAME)
    created_at: Mapped[float]


class OperatorTokenRow(Base):
    """One operator's admin token: only the SHA-256 of the token is stored, never the token."""

    __tablename__ = "operator_tokens"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float]
    created_by: Mapped[str] = mapped_column(NAME)
