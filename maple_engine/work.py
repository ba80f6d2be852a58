"""What a job needs next, as the sensor and the CLI driver see it: shards to submit, batches to
collect (one provider poll for all), the batches a pushed event says ended, and a tag of the
collected results for merged run keys."""

import dataclasses
import time
from collections.abc import Collection

from maple_engine.job import Job
from maple_engine.model import BatchState, Submission
from maple_engine.providers.base import content_hash
from maple_engine.state import ShardSummary
from maple_engine.storage.batch_events import BatchEvents


@dataclasses.dataclass(frozen=True)
class Work:
    """What the job needs next, as the sensor and the CLI driver see it."""

    submit: list[str]
    collect: list[tuple[str, Submission, BatchState]]
    waiting: int
    done: int
    total: int
    #: every batch still out at the last poll, with its state (the queue budget reads it)
    states: list[tuple[Submission, BatchState]] = dataclasses.field(default_factory=list)
    #: only the batches an event announced were polled: ``states`` holds those alone
    partial: bool = False

    @property
    def finished(self) -> bool:
        return self.total > 0 and self.done == self.total


def pending_work(job: Job, only: Collection[str] | None = None) -> Work:
    """Shards to submit, batches that ended (one provider poll for all), shards done.
    ``only``: poll just these batches (those a pushed event announced) unless a shard is to be
    admitted now (`_admits_now`)."""
    manifest = job.state.manifest() or []
    submit: list[str] = []
    waiting: list[Submission] = []
    done = 0
    for shard in manifest:
        progress = job.state.progress(shard.key)
        if progress.action == "submit":
            submit.append(shard.key)
        elif progress.action == "wait" and progress.submission is not None:
            waiting.append(progress.submission)
        else:
            done += 1
    if job.state.stop_reason() is not None:
        done += len(submit)
        submit = []
    partial = only is not None and not _admits_now(job, submit)
    asked = [s for s in waiting if s.batch_id in (only or ())] if partial else waiting
    events = pushed_events(job)
    noticed = events.among({s.batch_id for s in asked}) if events is not None else set()
    states = job.poll(asked) if asked else {}
    if events is not None and noticed:  # polled since they came (listed before the poll)
        events.consume(noticed)
    ended = [(s.shard, s, states[s.batch_id]) for s in asked if states[s.batch_id].ended]
    polled = [(s, states[s.batch_id]) for s in asked]
    return Work(submit, ended, len(waiting) - len(ended), done, len(manifest), polled, partial)


def _admits_now(job: Job, submit: list[str]) -> bool:
    """Whether shards are to be submitted now, their admission reading every batch's state:
    not those that wait for queue room or for a chained run (the next full poll admits them)."""
    if not submit or job.state.queue_wait_record() is not None:
        return False
    return not job.state.chain_held(time.time())


def pushed_events(job: Job) -> BatchEvents | None:
    """The events the job's provider pushes (None: it pushes none; its batches are polled)."""
    provider = job.wire.capabilities.webhooks
    if provider is None or job.mode != "batch":
        return None
    return BatchEvents(job.state.storage, provider)


def pushed(job: Job) -> set[str]:
    """The batches the job waits for whose end an event announced: one listing of the events,
    and the job's state read only when there are some. The events of the job's batches it no
    longer waits for (collected after an earlier poll) are consumed."""
    events = pushed_events(job)
    listed = events.waiting() if events is not None else set()
    if events is None or not listed:
        return set()
    waiting = set(waiting_batches(job))
    manifest = job.state.manifest() or []
    ours = {s.batch_id for shard in manifest for s in job.state.submissions(shard.key)}
    events.consume((listed & ours) - waiting)
    return listed & waiting


def waiting_batches(job: Job) -> list[str]:
    """The ids of the batches the job waits for."""
    found = []
    for shard in job.state.manifest() or []:
        progress = job.state.progress(shard.key)
        if progress.action == "wait" and progress.submission is not None:
            found.append(progress.submission.batch_id)
    return found


def generation(job: Job) -> str:
    """A tag that changes whenever any shard's collected results change (for merged run keys)."""
    manifest = job.state.manifest() or []
    parts = [
        f"{s.key}:{(job.state.summary(s.key) or ShardSummary(0, 0, False)).attempt}"
        for s in manifest
    ]
    return content_hash([",".join(parts).encode()])[:12]


def only_left(job: Job, shards: Collection[str]) -> bool:
    """Whether ``shards`` are all the job has left: every other shard is final (nothing to
    submit, no batch out)."""
    return all(
        s.key in shards or job.state.progress(s.key).action not in ("submit", "wait")
        for s in job.state.manifest() or []
    )


def merged_for(job: Job) -> bool:
    """Whether merged holds the job's current results (its record names their generation)."""
    return (job.state.merged_record() or {}).get("generation") == generation(job)
