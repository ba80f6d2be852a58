"""Cancel a job: stop new submissions and cancel its batches in flight at the provider (``maple
cancel``, a handle's ``cancel()``); the job stays resumable."""

from maple_engine.errors import ConfigError, ProviderError
from maple_engine.model import StopKind, Submission
from maple_engine.providers.attribution import ENV as ATTRIBUTION_ENV
from maple_engine.providers.base import Lane
from maple_engine.providers.lost import LOST
from maple_engine.state import JobState


def in_flight(state: JobState, provider: Lane) -> list[Submission]:
    """Recorded batches still waiting, plus batches the job created but never recorded.

    A recorded batch these credentials cannot see (the provider does not know it: another
    project's, say, when the job ran on its team's account and this shell has no attribution
    map) is a `ConfigError` naming it: nothing is cancelled, so nothing is said to be."""
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
    if unseen:
        team = (state.read_spec() or {}).get("spec", {}).get("team")
        whose = f" (the job ran for team {team!r}: set {ATTRIBUTION_ENV} as it had)" if team else ""
        raise ConfigError(
            f"job {state.job}: the provider does not know batch {unseen[0]} with these "
            f"credentials{whose}; nothing was cancelled and the job was not stopped. Use the "
            "job's key, base URL, headers and team attribution, then cancel again."
        )
    return [s for s in waiting.values() if not states[s.batch_id].ended]


def cancel_job(state: JobState, provider: Lane) -> list[Submission]:
    """Stop new submissions, cancel in-flight batches; the job stays resumable."""
    batches = in_flight(state, provider)  # before the stop: one it cannot see stops nothing
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
