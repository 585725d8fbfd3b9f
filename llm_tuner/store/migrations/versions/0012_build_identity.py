"""build identity: the llama.cpp build (and GPU driver) of each run and saved profile version, and the --help
text of each build a profile version was saved with (so a later build's flags can be compared with it).

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bench_runs") as batch:
        batch.add_column(sa.Column("build_key", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("build_json", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("notes", sa.JSON(), nullable=True))
        batch.create_index("ix_bench_runs_build_key", ["build_key"])
    with op.batch_alter_table("profile_versions") as batch:
        batch.add_column(sa.Column("build_key", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("build_json", sa.JSON(), nullable=True))
    op.create_table(
        "build_helps",
        sa.Column("help_sha256", sa.String(length=64), primary_key=True),
        sa.Column("text", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("build_helps")
    with op.batch_alter_table("profile_versions") as batch:
        batch.drop_column("build_json")
        batch.drop_column("build_key")
    with op.batch_alter_table("bench_runs") as batch:
        batch.drop_index("ix_bench_runs_build_key")
        batch.drop_column("notes")
        batch.drop_column("build_json")
        batch.drop_column("build_key")
