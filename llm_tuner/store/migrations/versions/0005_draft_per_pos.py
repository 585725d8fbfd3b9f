"""bench_reps.draft_accepted_per_pos: accepted draft tokens per position during a repetition.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bench_reps") as batch:
        batch.add_column(sa.Column("draft_accepted_per_pos", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bench_reps") as batch:
        batch.drop_column("draft_accepted_per_pos")
