"""Atomic budget admission in the cost ledger: of concurrent runs, never more than one batch
beyond the budget in total.

Before a batch is created, its estimate is admitted in the same transaction that reads what the
job has committed: the actual cost of every recorded attempt, plus the estimates of admitted
attempts not recorded yet (batches in flight). That transaction holds the job's advisory lock on
PostgreSQL (``pg_advisory_xact_lock``) and the database's write lock on SQLite
(``BEGIN IMMEDIATE``), so two runs can not both read the same committed spend and both pass.
Admitting an attempt that is already admitted succeeds again (a rerun after a crash).
"""

import dataclasses
import hashlib
from collections.abc import Collection
from datetime import UTC, datetime

import sqlalchemy as sa

_TOLERANCE = 1e-9


def admissions_table(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "budget_admissions",
        md,
        sa.Column("job", sa.String(255), primary_key=True),
        sa.Column("shard", sa.String(255), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("estimate_usd", sa.Double, nullable=False),
        sa.Column("admitted_at", sa.DateTime, nullable=False),  # naive UTC
    )


@dataclasses.dataclass(frozen=True)
class Admission:
    admitted: bool
    spent_usd: float  # actual cost of the job's recorded attempts
    in_flight_usd: float  # estimates of admitted attempts with no recorded cost yet

    @property
    def committed_usd(self) -> float:
        return self.spent_usd + self.in_flight_usd


def job_lock_id(job: str) -> int:
    """A stable signed 64-bit advisory lock id for ``job``."""
    return int.from_bytes(
        hashlib.sha256(f"maple-budget:{job}".encode()).digest()[:8], "big", signed=True
    )


def admit(
    conn: sa.Connection,
    costs: sa.Table,
    admissions: sa.Table,
    key: tuple[str, str, int],
    *,
    estimate_usd: float,
    budget_usd: float,
    scope: Collection[str] | None = None,
) -> Admission:
    """Admit attempt ``key`` (job, shard, attempt) if committed spend + its estimate fits.

    ``scope``: the shards the budget covers (one run of a living job); default every shard."""
    job, shard, attempt = key
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(job_lock_id(job))))
    in_costs = costs.c.job == job
    in_admissions = admissions.c.job == job
    if scope is not None:
        in_costs = in_costs & costs.c.shard.in_(list(scope))
        in_admissions = in_admissions & admissions.c.shard.in_(list(scope))
    spent = conn.execute(
        sa.select(sa.func.coalesce(sa.func.sum(costs.c.cost_usd), 0.0)).where(in_costs)
    ).scalar_one()
    recorded = sa.exists().where(
        costs.c.job == admissions.c.job,
        costs.c.shard == admissions.c.shard,
        costs.c.attempt == admissions.c.attempt,
    )
    flying = conn.execute(
        sa.select(sa.func.coalesce(sa.func.sum(admissions.c.estimate_usd), 0.0)).where(
            in_admissions, ~recorded
        )
    ).scalar_one()
    mine = (admissions.c.job == job) & (admissions.c.shard == shard)
    already = conn.execute(sa.select(admissions.c.job).where(mine, admissions.c.attempt == attempt))
    if already.first() is not None:
        return Admission(True, float(spent), float(flying))
    if float(spent) + float(flying) + estimate_usd > budget_usd + _TOLERANCE:
        return Admission(False, float(spent), float(flying))
    now = datetime.now(UTC).replace(tzinfo=None)
    conn.execute(
        admissions.insert().values(
            job=job, shard=shard, attempt=attempt, estimate_usd=estimate_usd, admitted_at=now
        )
    )
    return Admission(True, float(spent), float(flying))
