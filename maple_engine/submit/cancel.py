"""Cancel a job: stop new submissions and cancel its batches in flight at the provider (``maple
cancel``, a handle's ``cancel()``); the job stays resumable."""

from maple_engine.errors import ProviderError
from maple_engine.model import StopKind, Submission
from maple_engine.providers.base import Lane
from maple_engine.state import JobState


def in_flight(state: JobState, provider: Lane) -> list[Submission]:
    """Recorded batches still waiting, plus batches the job created but never recorded."""
    waiting = {}
    for shard in state.manifest() or []:
        progress = state.progress(shard.key)
        if progress.action == "wait" and progress.submission is not None:
            waiting[progress.submission.batch_id] = progress.submission
    for orphan in provider.find_orphans(state.job):
        waiting.setdefault(orphan.batch_id, orphan)
    if not waiting:
        return []
    states = provider.poll(list(waiting.values()))
    return [s for s in waiting.values() if not states[s.batch_id].ended]


def cancel_job(state: JobState, provider: Lane) -> list[Submission]:
    """Stop new submissions, cancel in-flight batches; the job stays resumable."""
    state.stop(
        "cancelled with `maple cancel`; rerun the same `maple enrich` command (same --job) "
        "to resume: rows the cancelled batches did not run are sent again",
        kind=StopKind.CANCEL,
    )
    batches = in_flight(state, provider)
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
