"""sessions tables: server_sessions, session_requests.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "server_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("started_unix", sa.Float(), nullable=False),
        sa.Column("ended_unix", sa.Float(), nullable=True),
        sa.Column("argv_json", sa.Text(), nullable=False),
        sa.Column("url", sa.String(length=512), nullable=True),
        sa.Column("profile_version_id", sa.Integer(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_reason", sa.Text(), nullable=True),
        sa.Column("telemetry_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_server_sessions")),
    )
    op.create_index(op.f("ix_server_sessions_started_unix"), "server_sessions", ["started_unix"])
    op.create_index(op.f("ix_server_sessions_profile_version_id"), "server_sessions", ["profile_version_id"])
    op.create_table(
        "session_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("time_unix", sa.Float(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=True),
        sa.Column("task", sa.Integer(), nullable=True),
        sa.Column("cache_n", sa.Integer(), nullable=True),
        sa.Column("prompt_n", sa.Integer(), nullable=True),
        sa.Column("prompt_ms", sa.Float(), nullable=True),
        sa.Column("prompt_per_second", sa.Float(), nullable=True),
        sa.Column("predicted_n", sa.Integer(), nullable=True),
        sa.Column("predicted_ms", sa.Float(), nullable=True),
        sa.Column("predicted_per_second", sa.Float(), nullable=True),
        sa.Column("draft_n", sa.Integer(), nullable=True),
        sa.Column("draft_n_accepted", sa.Integer(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("approximate", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["server_sessions.id"],
                                name=op.f("fk_session_requests_session_id_server_sessions"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_requests")),
    )
    op.create_index(op.f("ix_session_requests_session_id"), "session_requests", ["session_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_session_requests_session_id"), table_name="session_requests")
    op.drop_table("session_requests")
    op.drop_index(op.f("ix_server_sessions_profile_version_id"), table_name="server_sessions")
    op.drop_index(op.f("ix_server_sessions_started_unix"), table_name="server_sessions")
    op.drop_table("server_sessions")
