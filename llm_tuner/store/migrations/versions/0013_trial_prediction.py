"""bench_tune_trials.predicted_json: the speed model's prediction of a tune candidate, made before it started.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bench_tune_trials") as batch:
        batch.add_column(sa.Column("predicted_json", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bench_tune_trials") as batch:
        batch.drop_column("predicted_json")
