"""Tunes: a bench group of kind "tune" records its whole spec (every knob, the objective), status and result;
bench_tune_trials holds each candidate (pruned, failed, measured) with its values, argv, score and run.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bench_groups") as batch:
        batch.add_column(sa.Column("spec_json", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("knobs_json", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("result_json", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("status", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("owner_pid", sa.Integer(), nullable=True))
    op.create_table(
        "bench_tune_trials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("knob", sa.String(length=200), nullable=True),
        sa.Column("values_json", sa.JSON(), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("run_ids", sa.JSON(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("flagged", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["group_id"], ["bench_groups.id"],
                                name=op.f("fk_bench_tune_trials_group_id_bench_groups"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_tune_trials")),
    )
    op.create_index(op.f("ix_bench_tune_trials_group_id"), "bench_tune_trials", ["group_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_bench_tune_trials_group_id"), table_name="bench_tune_trials")
    op.drop_table("bench_tune_trials")
    with op.batch_alter_table("bench_groups") as batch:
        for col in ("owner_pid", "status", "result_json", "knobs_json", "spec_json"):
            batch.drop_column(col)
