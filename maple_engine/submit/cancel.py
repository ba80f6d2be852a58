"""Cancel a job: stop new submissions and cancel its batches in flight at the provider (``maple
cancel``, a handle's ``cancel()``); the job stays resumable."""

from maple_engine.errors import ConfigError, ProviderError
from maple_engine.model import StopKind, Submission
from maple_engine.providers.attribution import ENV as ATTRIBUTION_ENV
from maple_engine.providers.base import Lane
from maple_engine.providers.lost import LOST
from maple_engine.state import JobState


def in_flight(state: JobState, provider: Lane, unmapped: str | None = None) -> list[Submission]:
    """Recorded batches still waiting, plus batches the job created but never recorded.

    ``unmapped``: the job's team, when the job ran for it but this shell's team attribution
    map does not list it. A recorded batch the provider then does not know is most likely in
    the team's project, not gone: a `ConfigError` naming it (nothing is cancelled, so nothing
    is said to be). Otherwise such a batch is gone, and nothing is left to cancel."""
    waiting = {}
    for shard in state.manifest() or []:
        progress = state.progress(shard.key)
        if progress.action == "wait" and progress.submission is not None:
            waiting[progress.submission.batch_id] = progress.submission
    recorded = set(waiting)
    for orphan in provider.find_orphans(state.job):
        waiting.setdefault(orphan.batch_id, orphan)
    if not waiting:
        return []
    states = provider.poll(list(waiting.values()))
    unseen = [b for b in sorted(recorded) if states[b].status == LOST]
    if unseen and unmapped is not None:
        raise ConfigError(
            f"job {state.job}: the provider does not know batch {unseen[0]} with these "
            f"credentials (the job ran for team {unmapped!r}, which this shell's "
            f"{ATTRIBUTION_ENV} does not list: set it as the job had); nothing was cancelled "
            "and the job was not stopped."
        )
    return [s for s in waiting.values() if not states[s.batch_id].ended]


def cancel_job(state: JobState, provider: Lane, unmapped: str | None = None) -> list[Submission]:
    """Stop new submissions, cancel in-flight batches; the job stays resumable."""
    batches = in_flight(state, provider, unmapped)  # before the stop: an unseen one stops nothing
    state.stop(
        "cancelled with `maple cancel`; rerun the same `maple enrich` command (same --job) "
        "to resume: rows the cancelled batches did not run are sent again",
        kind=StopKind.CANCEL,
    )
    batches += [b for b in in_flight(state, provider) if b not in batches]  # made meanwhile
    cancelled = []
    for submission in batches:
        try:
            provider.cancel(submission)
        except ProviderError as exc:
            if exc.status != 400:  # 400: the batch ended meanwhile; nothing to cancel
                raise
            continue
        cancelled.append(submission)
    return cancelled
