"""session_requests: the model that served each request (a router's, named by the request; empty for a server of
one model), so a router session's history names the model of every request as the Live tab did.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("session_requests") as batch:
        batch.add_column(sa.Column("model", sa.String(length=512), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_requests") as batch:
        batch.drop_column("model")
