"""The storage root as a Dagster resource: the engine's ``Storage`` under a configured root."""

import contextlib
import os

import dagster as dg
from pydantic import Field, PrivateAttr

from maple_engine.deployment import require_shared
from maple_engine.ledger.create_locks import create_locks
from maple_engine.memory import tune_allocator
from maple_engine.storage.probe import check_store
from maple_engine.storage.s3 import ENVIRONMENT, S3Settings
from maple_engine.storage.storage import Storage, is_remote
from resources.run_launcher import beat_while_running, launched_on


class StorageResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The storage root every job writes under: a local folder or ``s3://bucket/prefix``."""

    root: str = Field(description="Storage root: a local folder or s3://bucket/prefix.")
    ledger_url: str | None = Field(
        default=None,
        description="The cost ledger's database URL. Where it is PostgreSQL, the exclusive "
        "creates (leases, batch claims) of an S3 store that ignores If-None-Match are kept "
        "there; without it such a store is refused.",
    )
    _worker_beat: contextlib.ExitStack | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """At run start: flat memory in run workers; refuse a local root across machines, and
        an S3 store that does not honour what leases and reads rely on (probed once per
        process); beat the run worker's lease where run monitoring watches it
        (`resources.run_launcher`)."""
        tune_allocator()
        if not is_remote(self.root):
            require_shared(
                context.instance,
                "storage root",
                os.path.abspath(self.root),
                "Set MAPLE_STORAGE to s3://bucket/prefix",
                launched_on(context.run),
            )
        locks = create_locks(self.ledger_url)
        kept = check_store(self.root, "The storage root", self.s3_settings(), locks)
        if kept is not None and context.log is not None:
            context.log.info(kept)
        run_id = context.run.run_id if context.run is not None else None
        self._worker_beat = beat_while_running(context.instance, run_id, self.storage())

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._worker_beat is not None:
            self._worker_beat.close()
            self._worker_beat = None

    def s3_settings(self) -> S3Settings:
        """How ``s3://`` is reached: here the AWS_* environment (``resources.s3_resources``
        has the variant that takes a dagster-aws ``S3Resource``)."""
        return ENVIRONMENT

    def storage(self) -> Storage:
        return Storage(self.root, s3=self.s3_settings())
