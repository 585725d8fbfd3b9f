"""server_sessions: the owning process (pid and its start time), so sessions a killed app left open can be
closed as interrupted at the next start without ever marking a second running instance's.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("server_sessions") as batch:
        batch.add_column(sa.Column("owner_pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("owner_started_unix", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server_sessions") as batch:
        batch.drop_column("owner_started_unix")
        batch.drop_column("owner_pid")
