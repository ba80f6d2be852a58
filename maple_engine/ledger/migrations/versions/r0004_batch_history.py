"""The batch history: every provider batch's life (``maple_engine.ledger.batch_history``)."""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"

PHASES = ("validating", "in_progress", "finalizing")


def upgrade() -> None:
    op.create_table(
        "batch_history",
        sa.Column("provider", sa.String(255), primary_key=True),
        sa.Column("batch_id", sa.String(255), primary_key=True),
        *(sa.Column(c, sa.String(255), nullable=False) for c in ("model", "job", "team")),
        sa.Column("version", sa.Integer, nullable=True),
        sa.Column("shard", sa.String(255), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("provider_status", sa.String(64), nullable=False),
        *(sa.Column(f"{c}_at", sa.DateTime, nullable=True) for c in ("created", *PHASES)),
        sa.Column("ended_at", sa.DateTime, nullable=True),
        sa.Column("seen_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_batch_history_created_at", "batch_history", ["created_at"])
    op.create_index("ix_batch_history_queue", "batch_history", ["provider", "model"])


def downgrade() -> None:
    op.drop_table("batch_history")
