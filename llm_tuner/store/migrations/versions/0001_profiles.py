"""profiles tables: profiles (named) and profile_versions (immutable).

Revision ID: 0001
Revises: None
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profiles")),
    )
    with op.batch_alter_table("profiles") as batch:
        batch.create_index(batch.f("ix_profiles_name"), ["name"], unique=False)
    op.create_table(
        "profile_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("profile_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("note", sa.String(length=500), nullable=False),
        sa.ForeignKeyConstraint(["profile_id"], ["profiles.id"], name=op.f("fk_profile_versions_profile_id_profiles"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_profile_versions")),
        sa.UniqueConstraint("profile_id", "version", name=op.f("uq_profile_versions_profile_id")),
    )
    with op.batch_alter_table("profile_versions") as batch:
        batch.create_index(batch.f("ix_profile_versions_profile_id"), ["profile_id"], unique=False)


def downgrade() -> None:
    op.drop_table("profile_versions")
    op.drop_table("profiles")
