"""The batch interface over a real-time API: what a job drives when its provider (or a deadline's
fallback) answers one request at a time.

``submit`` runs the shard attempt's requests right away (`maple_engine.send.attempt`: keep-alive,
bounded and adaptive concurrency, paced to the RPM/TPM learned from the rate-limit headers or
set explicitly) and checkpoints every finished row (`maple_engine.send.checkpoints`). Rerunning
the same attempt after a crash sends only the rows without a checkpoint. The returned
``Submission`` has a synthetic batch id ``rt-<job>-<shard>-<attempt>``; ``poll`` reports it ended
(all rows are checkpointed by the time ``submit`` returns; rows without a checkpoint, if any,
read as "not run" and are retried), and ``results`` reads the checkpoints.

Within an attempt a request is retried on 429 (after the wait the answer asks for), 5xx/529 and
timeouts with exponential backoff and jitter, up to the provider's ``max_attempts`` sends and
within the row's retry budget (the payload's ``SendBudget``); then the row is reported failed
with its class and the pipeline's retry policy takes over. Quota errors are not retried, and
stop the attempt from sending further rows. A refusal of the job's setup (401/403 among them)
aborts the attempt with ``SetupRefused``; most requests failing the same way, with
``BreakerOpen``; a reply that can never fit the job (the payload's ``fit``:
`maple_engine.providers.reply_fit`), with ``ReplyMismatch``, its rows not kept
(`maple_engine.send.attempt`).
"""

import dataclasses

import polars as pl

from maple_engine.model import BatchState, Submission
from maple_engine.providers.base import (
    LOST_SENDS,
    Lane,
    ShardPayload,
)
from maple_engine.providers.realtime import RealtimeProvider
from maple_engine.providers.registry import Built
from maple_engine.send.attempt import AttemptRun, run_sync
from maple_engine.send.checkpoints import RowCheckpoints
from maple_engine.send.rate_shares import Share, account_digest, rate_share
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage


class RealtimeLane:
    """A real-time provider's attempts run as batches (the job's `Lane`); ``wire`` is the
    provider (what it is, how it encodes)."""

    def __init__(self, provider: RealtimeProvider) -> None:
        self.wire = provider

    def check_endpoint(self) -> None:
        self.wire.check_endpoint()

    def close(self) -> None:
        """Nothing kept open: each attempt opens and closes its own connections."""

    # -- sending ----------------------------------------------------------------------------
    def _checkpoints(self, job: str, shard: str, attempt: int) -> RowCheckpoints:
        return RowCheckpoints(
            Storage(self.wire.checkpoint_root),
            JobLayout(job).checkpoints(shard, attempt),
            self.wire.checkpoint_rows,
            self.wire.checkpoint_seconds,
        )

    def _share(self, provider: RealtimeProvider, model: str) -> Share:
        """This run's share of the account's limit for ``model``, among every live sender."""
        headers = repr(sorted(provider.auth_headers().items()))
        account = account_digest(provider.resolved_base_url(), headers)
        root, db = provider.checkpoint_root, provider.rate_share_db
        return rate_share(db, root, provider.name, account, model)

    def submit(self, payload: ShardPayload) -> Submission:
        provider = self.wire.bound_to(payload.model)
        checkpoints = self._checkpoints(payload.job, payload.shard, payload.attempt)
        attempt = f"{provider.batch_id_prefix}{payload.job}-{payload.shard}-{payload.attempt}"
        done = checkpoints.open()
        # a run resuming an interrupted attempt names its own rows apart from the ones it
        # carries, so that its summary counts only what it sent
        carried = tuple(sorted(set(done["batch_id"].drop_nulls().to_list())))
        batch_id = f"{attempt}.{checkpoints.number}" if done.height else attempt
        todo = payload.requests.join(done, on="custom_id", how="anti", maintain_order="left")
        rows = list(zip(todo["custom_id"].to_list(), todo["request"].to_list(), strict=True))
        try:
            share = self._share(provider, payload.model)
            run = AttemptRun(
                provider,
                checkpoints,
                batch_id,
                share,
                self.wire.decorations.sending,
                budget=payload.budget,
                stopped=payload.stopped,
                fit=payload.fit,
            )
            run_sync(run.run(rows))
        finally:
            checkpoints.close()
        return dataclasses.replace(payload.submission(provider.name, batch_id, ""), carried=carried)

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        states = {}
        for sub in submissions:
            count = self._checkpoints(sub.job, sub.shard, sub.attempt).count()
            status = "completed" if count >= sub.request_count else "incomplete"
            states[sub.batch_id] = BatchState(
                sub.batch_id, status, ended=True, completed=count, total=sub.request_count
            )
        return states

    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        """The attempt's rows, with the sends a killed run lost of each (``LOST_SENDS``)."""
        sub = submission
        checkpoints = self._checkpoints(sub.job, sub.shard, sub.attempt)
        rows, lost = checkpoints.load(), checkpoints.lost()
        counts = pl.DataFrame(
            {"custom_id": list(lost), LOST_SENDS: list(lost.values())},
            schema={"custom_id": pl.String, LOST_SENDS: pl.Int64},
        )
        return rows.join(counts, on="custom_id", how="left", maintain_order="left")

    def cancel(self, submission: Submission) -> None:
        """Nothing runs after ``submit`` returns; a killed run simply stops sending."""

    def find_orphans(self, job: str) -> list[Submission]:
        """Never any: a rerun of an unrecorded attempt resumes from its checkpoints instead."""
        return []


def lane_of(provider: Built) -> Lane:
    """What a job drives for ``provider``: a real-time provider's lane, a batch one itself."""
    if isinstance(provider, RealtimeProvider):  # the real-time core's interface, any provider
        return RealtimeLane(provider)
    return provider
