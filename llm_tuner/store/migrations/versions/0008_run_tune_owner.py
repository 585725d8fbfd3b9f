"""bench_runs and bench_groups (tunes): the owner's start time beside its pid, as server_sessions keep it (0006),
so a pid reused by an unrelated process never counts as a live owner of a run or a tune.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("bench_runs", "bench_groups"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("owner_started_unix", sa.Float(), nullable=True))


def downgrade() -> None:
    for table in ("bench_runs", "bench_groups"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("owner_started_unix")
