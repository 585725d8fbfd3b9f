"""Ids are never reused, and groups are numbered per kind: `id_counters` keeps the highest id ever given per table
(and the highest number per group kind), so after `runs delete 10` the next run is not run 10 again (SQLite gives
max(id)+1); `bench_groups.number` is a tune's, a sweep's or an A/B group's number among its kind (the first tune of
a history is tune 1, not 4). Existing rows keep their ids, and existing groups their numbers (number = id).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("id_counters",
                    sa.Column("name", sa.String(length=64), nullable=False),
                    sa.Column("last_id", sa.Integer(), nullable=False),
                    sa.PrimaryKeyConstraint("name", name=op.f("pk_id_counters")))
    with op.batch_alter_table("bench_groups") as batch:
        batch.add_column(sa.Column("number", sa.Integer(), nullable=True))
    op.execute("UPDATE bench_groups SET number = id")
    op.execute("INSERT INTO id_counters (name, last_id) SELECT 'bench_runs', max(id) FROM bench_runs "
               "WHERE id IS NOT NULL HAVING count(*) > 0")
    op.execute("INSERT INTO id_counters (name, last_id) SELECT 'bench_groups', max(id) FROM bench_groups "
               "HAVING count(*) > 0")
    op.execute("INSERT INTO id_counters (name, last_id) SELECT 'bench_groups:' || kind, max(number) "
               "FROM bench_groups GROUP BY kind")


def downgrade() -> None:
    with op.batch_alter_table("bench_groups") as batch:
        batch.drop_column("number")
    op.drop_table("id_counters")
