"""speed_calibrations: the speed model's device rates measured on this machine, per build and GPU driver.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "speed_calibrations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("build", sa.String(length=128), nullable=False),
        sa.Column("driver", sa.String(length=128), nullable=False, server_default=""),
        sa.Column("source", sa.String(length=512), nullable=False, server_default=""),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("calibration_json", sa.Text(), nullable=False),
    )
    op.create_index("ix_speed_calibrations_build", "speed_calibrations", ["build"])


def downgrade() -> None:
    op.drop_index("ix_speed_calibrations_build", table_name="speed_calibrations")
    op.drop_table("speed_calibrations")
