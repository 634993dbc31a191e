"""Capacity settings that outlive a control restart: operators' bounds and live overrides.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

Written by hand to match ``CapacityBoundsRow`` and ``CapacityOverrideRow`` of
``control/registry/schema.py`` (a unit test compares the two).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "capacity_bounds",
        sa.Column("pool", NAME, nullable=False),
        sa.Column("model", NAME, nullable=False),
        sa.Column("min_replicas", sa.Integer(), nullable=False),
        sa.Column("max_replicas", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("updated_by", NAME, nullable=False),
        sa.PrimaryKeyConstraint("pool", "model", name=op.f("pk_capacity_bounds")),
    )
    op.create_table(
        "capacity_overrides",
        sa.Column("pool", NAME, nullable=False),
        sa.Column("model", NAME, nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", NAME, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pool", "model", name=op.f("pk_capacity_overrides")),
    )


def downgrade() -> None:
    op.drop_table("capacity_overrides")
    op.drop_table("capacity_bounds")
