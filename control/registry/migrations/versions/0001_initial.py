"""Initial registry schema: models, versions, aliases, deployments, rollouts, append-only audit log.

Revision ID: 0001
Revises:
Create Date: 2026-01-01

Written by hand to match ``control/registry/schema.py`` (a unit test compares the two). The audit
log is made append-only by triggers: on SQLite ``RAISE(ABORT, ...)`` before UPDATE and DELETE, on
PostgreSQL one trigger function for UPDATE/DELETE (per row) and TRUNCATE (per statement). Other
dialects get no trigger and no partial unique index for active rollouts (the registry's own
check still refuses a second active rollout).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY_MESSAGE = "audit_log is append-only"
ACTIVE_ROLLOUT_WHERE = "status IN ('running', 'paused')"
NAME = sa.String(255)

SQLITE_TRIGGERS = (
    f"CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log "
    f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END",
    f"CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log "
    f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END",
)
POSTGRESQL_TRIGGERS = (
    "CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}'; END; $$",
    "CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log "
    "FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()",
    "CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log "
    "FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()",
)


def _create_catalog_tables() -> None:
    op.create_table(
        "models",
        sa.Column("name", NAME, nullable=False),
        sa.Column("kind", NAME, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_models")),
    )
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", NAME, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("artifact_uri", sa.Text(), nullable=False),
        sa.Column("manifest_digest", NAME, nullable=False),
        sa.Column("signer_key_id", NAME, nullable=False),
        sa.Column("requirements", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("created_by", NAME, nullable=False),
        sa.ForeignKeyConstraint(["model"], ["models.name"], name=op.f("fk_model_versions_model_models")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_versions")),
        sa.UniqueConstraint("model", "version", name=op.f("uq_model_versions_model_version")),
    )
    op.create_table(
        "aliases",
        sa.Column("model", NAME, nullable=False),
        sa.Column("weights", sa.JSON(), nullable=False),
        sa.Column("sticky", sa.String(16), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["model"], ["models.name"], name=op.f("fk_aliases_model_models")),
        sa.PrimaryKeyConstraint("model", name=op.f("pk_aliases")),
    )
    op.create_table(
        "deployments",
        sa.Column("model", NAME, nullable=False),
        sa.Column("pools", sa.JSON(), nullable=False),
        sa.Column("instances", sa.Integer(), nullable=False),
        sa.Column("min_warm_replicas", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["model"], ["models.name"], name=op.f("fk_deployments_model_models")),
        sa.PrimaryKeyConstraint("model", name=op.f("pk_deployments")),
    )


def _create_rollouts(dialect: str) -> None:
    op.create_table(
        "rollouts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", NAME, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("baseline_version", sa.Integer(), nullable=True),
        sa.Column("variants", sa.JSON(), nullable=False),
        sa.Column("sticky", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("thresholds", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("started_by", NAME, nullable=False),
        sa.ForeignKeyConstraint(["model"], ["models.name"], name=op.f("fk_rollouts_model_models")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollouts")),
    )
    op.create_index("ix_rollouts_model_id", "rollouts", ["model", "id"])
    if dialect in ("sqlite", "postgresql"):
        op.create_index(
            "uq_rollouts_one_active",
            "rollouts",
            ["model"],
            unique=True,
            sqlite_where=sa.text(ACTIVE_ROLLOUT_WHERE),
            postgresql_where=sa.text(ACTIVE_ROLLOUT_WHERE),
        )


def _create_audit_log(dialect: str) -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("actor", NAME, nullable=False),
        sa.Column("action", NAME, nullable=False),
        sa.Column("subject", NAME, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_log_subject_id", "audit_log", ["subject", "id"])
    op.create_index("ix_audit_log_action", "audit_log", ["action"])
    triggers = {"sqlite": SQLITE_TRIGGERS, "postgresql": POSTGRESQL_TRIGGERS}.get(dialect, ())
    for statement in triggers:
        op.execute(statement)


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    _create_catalog_tables()
    _create_rollouts(dialect)
    _create_audit_log(dialect)


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_update")
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_delete")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log")
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_change ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS audit_log_append_only()")
    op.drop_table("audit_log")
    op.drop_table("rollouts")
    op.drop_table("deployments")
    op.drop_table("aliases")
    op.drop_table("model_versions")
    op.drop_table("models")
