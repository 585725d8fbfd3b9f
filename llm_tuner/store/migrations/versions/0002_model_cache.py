"""model_cache tables.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_cache",
        sa.Column("path", sa.String(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("reader_version", sa.Integer(), nullable=False),
        sa.Column("info_json", sa.Text(), nullable=False),
        sa.Column("read_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("path", name=op.f("pk_model_cache")),
    )


def downgrade() -> None:
    op.drop_table("model_cache")
