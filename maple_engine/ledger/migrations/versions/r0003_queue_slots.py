"""Provider queue slots: the batches of every job asking for room in one provider queue."""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "queue_slots",
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("shard", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("queue", sa.String(255), nullable=False),
        sa.Column("team", sa.String(255), nullable=False),
        sa.Column("weight", sa.Double, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("units", sa.BigInteger, nullable=False),
        sa.Column("waiting_since", sa.DateTime, nullable=False),
        sa.Column("seen_at", sa.DateTime, nullable=False),
        sa.Column("enqueued_at", sa.DateTime, nullable=True),
        sa.Column("sent_at", sa.DateTime, nullable=True),
        sa.Column("validated", sa.Boolean, nullable=False),
        sa.Column("released_at", sa.DateTime, nullable=True),
    )
    op.create_index("ix_queue_slots_queue", "queue_slots", ["queue"])


def downgrade() -> None:
    op.drop_table("queue_slots")
