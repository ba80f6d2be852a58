"""One alembic revision per schema change, applied in order by ``maple_engine.ledger.schema``."""
