"""The per-attempt cost records: exact sums over the billed requests of one shard attempt."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None

TOKENS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")


def upgrade() -> None:
    op.create_table(
        "attempt_costs",
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("shard", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        *(sa.Column(c, sa.String(255), nullable=False) for c in ("team", "model", "provider")),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("batch_id", sa.String(255), nullable=True),
        *(sa.Column(c, sa.BigInteger, nullable=False) for c in ("requests", *TOKENS)),
        sa.Column("cost_usd", sa.Double, nullable=False),
        sa.Column("realtime_cost_usd", sa.Double, nullable=False),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_attempt_costs_recorded_at", "attempt_costs", ["recorded_at"])
    op.create_index("ix_attempt_costs_team", "attempt_costs", ["team"])


def downgrade() -> None:
    op.drop_table("attempt_costs")
