"""Per-operator admin tokens: name, role and the SHA-256 of the token (never the token itself).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03

Written by hand to match ``OperatorTokenRow`` in ``control/registry/schema.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "operator_tokens",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_operator_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_operator_tokens_token_sha256")),
    )


def downgrade() -> None:
    op.drop_table("operator_tokens")
