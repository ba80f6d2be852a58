"""Rate holders: the real-time senders sharing one provider limit, each beating its row."""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "rate_holders",
        sa.Column("scope", sa.String(255), primary_key=True),
        sa.Column("sender", sa.String(255), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("since", sa.Double, nullable=False),
        sa.Column("beat_at", sa.Double, nullable=False),
    )
    op.create_index("ix_rate_holders_beat_at", "rate_holders", ["beat_at"])


def downgrade() -> None:
    op.drop_table("rate_holders")
