"""Queue slots name the storage root of their job: a job on another root (another team's, with
the same cost ledger) can tell whether the slot's driver is gone."""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.add_column("queue_slots", sa.Column("root", sa.String(1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queue_slots") as batch:
        batch.drop_column("root")
