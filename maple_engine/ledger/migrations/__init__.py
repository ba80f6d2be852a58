"""The cost ledger's schema migrations, as alembic revisions (``versions/``)."""
