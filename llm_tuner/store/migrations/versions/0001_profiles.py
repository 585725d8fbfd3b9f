"""profiles tables.

Revision ID: 0001
Revises: None
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
