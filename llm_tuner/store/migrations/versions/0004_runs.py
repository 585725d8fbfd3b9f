"""runs tables: bench_groups, bench_runs, bench_reps.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bench_groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("param", sa.String(length=200), nullable=False),
        sa.Column("values_json", sa.JSON(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_groups")),
    )
    op.create_table(
        "bench_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("profile_version_id", sa.Integer(), nullable=True),
        sa.Column("server_argv", sa.JSON(), nullable=False),
        sa.Column("server_env", sa.JSON(), nullable=False),
        sa.Column("attached_url", sa.String(length=500), nullable=True),
        sa.Column("model_path", sa.Text(), nullable=True),
        sa.Column("model_size", sa.Integer(), nullable=True),
        sa.Column("model_mtime", sa.Float(), nullable=True),
        sa.Column("model_hash", sa.String(length=64), nullable=True),
        sa.Column("binary_path", sa.Text(), nullable=True),
        sa.Column("binary_version", sa.String(length=100), nullable=True),
        sa.Column("binary_backends", sa.JSON(), nullable=False),
        sa.Column("devices", sa.JSON(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("sweep_value", sa.String(length=200), nullable=True),
        sa.Column("memory_predicted_mib", sa.JSON(), nullable=True),
        sa.Column("memory_measured_mib", sa.JSON(), nullable=True),
        sa.Column("llama_bench", sa.JSON(), nullable=False),
        sa.Column("llama_bench_skipped", sa.JSON(), nullable=False),
        sa.Column("llama_bench_error", sa.Text(), nullable=True),
        sa.Column("owner_pid", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["group_id"], ["bench_groups.id"], name=op.f("fk_bench_runs_group_id_bench_groups"),
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_runs")),
    )
    for col in ("group_id", "profile_version_id", "model_path", "status", "started_at"):
        op.create_index(op.f(f"ix_bench_runs_{col}"), "bench_runs", [col], unique=False)
    op.create_table(
        "bench_reps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("rep", sa.Integer(), nullable=False),
        sa.Column("client", sa.Integer(), nullable=False),
        sa.Column("cache_n", sa.Integer(), nullable=True),
        sa.Column("prompt_n", sa.Integer(), nullable=True),
        sa.Column("prompt_ms", sa.Float(), nullable=True),
        sa.Column("prompt_per_second", sa.Float(), nullable=True),
        sa.Column("predicted_n", sa.Integer(), nullable=True),
        sa.Column("predicted_ms", sa.Float(), nullable=True),
        sa.Column("predicted_per_second", sa.Float(), nullable=True),
        sa.Column("draft_n", sa.Integer(), nullable=True),
        sa.Column("draft_n_accepted", sa.Integer(), nullable=True),
        sa.Column("draft_steps", sa.Integer(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("peaks", sa.JSON(), nullable=False),
        sa.Column("other_cpu_pct", sa.Float(), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["bench_runs.id"], name=op.f("fk_bench_reps_run_id_bench_runs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_reps")),
    )
    op.create_index(op.f("ix_bench_reps_run_id"), "bench_reps", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_bench_reps_run_id"), table_name="bench_reps")
    op.drop_table("bench_reps")
    for col in ("group_id", "profile_version_id", "model_path", "status", "started_at"):
        op.drop_index(op.f(f"ix_bench_runs_{col}"), table_name="bench_runs")
    op.drop_table("bench_runs")
    op.drop_table("bench_groups")
