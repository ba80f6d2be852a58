"""The lanes of a job with a deadline, and which of them sends an attempt.

``--deadline 6h`` (``deadline=`` on ``enrichment()``) counts from the start of the job's current
version. When ``deadline - margin`` arrives (the margin is a tenth of the deadline, at least 1 s
and at most 30 minutes: time for the cancels to settle and the real-time calls to run), every
shard attempt sent from then on goes to the provider's real-time API
(`maple_engine.submit.deadline` cancels the batches still running), as do the attempts of a
shard whose batch stalled (`maple_engine.submit.stalls`) or could not end in time
(`maple_engine.submit.escalation`).

The late lanes, in order, each only while it can still meet the deadline: where the provider
has a flex twin (real-time answers at batch prices, slower: OpenAI's ``openai-flex``), attempts
go there while the time left before the deadline is at least the flex provider's request
timeout (15 minutes by default); then standard real time while at least a tenth of the margin
is left (a hundredth of the deadline, at most 3 minutes); then, where the provider has a
priority twin (OpenAI's ``openai-priority``: ``service_tier: "priority"``, faster, twice the
standard price), the priority tier for that last part and past the deadline.

`DeadlineLanes` holds a job's lanes (its batch provider and the twins on the same API, built
from the registry with the batch provider's settings and the job's call decorations);
`attempt_lane` chooses the lane of an attempt, `submission_lane` the lane a recorded attempt
went through.
"""

import dataclasses
import time

from maple_engine.errors import ConfigError
from maple_engine.model import Kind, Submission, is_flex, is_priority, is_realtime
from maple_engine.providers.base import Lane, Wire
from maple_engine.providers.decorations import NO_DECORATIONS, CallDecorations
from maple_engine.providers.realtime import RealtimeProvider
from maple_engine.providers.registry import build_provider, capabilities, one_of
from maple_engine.send.lane import RealtimeLane
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

PRIORITY_SHARE = 0.1  # of the margin: the last part of it (and past the deadline) goes priority


def margin(duration_s: float) -> float:
    """How long before the deadline the batches are cancelled and real-time takes over."""
    return min(max(0.1 * duration_s, 1.0), 1800.0)


@dataclasses.dataclass(frozen=True)
class DeadlineLanes:
    """A batch job's lanes under a deadline of ``duration_s`` from the start of its version
    (kept under ``storage``): the batch provider, its real-time twin, and its flex and
    priority twins where it has them for the job's kind."""

    batch: Lane
    realtime: RealtimeLane
    flex: RealtimeLane | None
    priority: RealtimeLane | None
    storage: Storage
    job: str
    duration_s: float

    def deadline_at(self) -> float | None:
        """When the deadline falls (None: the job's version has not started)."""
        key = JobLayout(self.job).version
        if not self.storage.exists(key):
            return None
        return float(self.storage.read_json(key)["created_at"]) + self.duration_s

    def deadline_due(self) -> bool:
        at = self.deadline_at()
        return at is not None and time.time() >= at - margin(self.duration_s)

    def escalated(self, shard: str, attempt: int) -> bool:
        """An earlier attempt of ``shard`` stalled (`maple_engine.submit.stalls`)."""
        layout = JobLayout(self.job)
        return any(self.storage.exists(layout.stall_cancel(shard, n)) for n in range(1, attempt))

    def sent_late(self, shard: str, attempt: int) -> bool:
        """``shard`` could not reach the batch queue in time, at this attempt or an earlier
        one (`maple_engine.submit.escalation`): its attempts go through the late lane."""
        layout = JobLayout(self.job)
        return any(
            self.storage.exists(layout.deadline_late(shard, n)) for n in range(1, attempt + 1)
        )


def deadline_lanes(
    batch: Lane,
    storage: Storage,
    job: str,
    duration_s: float,
    kind: Kind,
    *,
    decorations: CallDecorations = NO_DECORATIONS,
) -> DeadlineLanes:
    """The lanes of job ``job`` of ``kind`` on ``batch`` with a deadline of ``duration_s``, the
    twins making their calls with the job's ``decorations`` (a `ConfigError` when the batch
    provider has no real-time API to fall back on)."""
    wire = batch.wire
    return DeadlineLanes(
        batch=batch,
        realtime=realtime_twin(wire, storage.root, decorations),
        flex=_twin(wire.capabilities.flex_twin, wire, storage.root, kind, decorations),
        priority=_twin(wire.capabilities.priority_twin, wire, storage.root, kind, decorations),
        storage=storage,
        job=job,
        duration_s=duration_s,
    )


def late_lane(lanes: DeadlineLanes, left_s: float) -> RealtimeLane:
    """The late lane for ``left_s`` seconds before the deadline: flex while one of its (slow)
    requests still fits, standard real time while at least a tenth of the margin is left,
    then the priority tier (where there is one)."""
    if lanes.flex is not None and left_s >= lanes.flex.wire.timeout_s:
        return lanes.flex
    if lanes.priority is not None and left_s < PRIORITY_SHARE * margin(lanes.duration_s):
        return lanes.priority
    return lanes.realtime


def attempt_lane(lanes: DeadlineLanes, shard: str, attempt: int) -> Lane:
    """The lane ``shard``'s ``attempt`` goes through: a late lane once the deadline is due or
    the shard was escalated (stalled, or marked as unable to end in time), else the batch."""
    if lanes.deadline_due() or lanes.escalated(shard, attempt) or lanes.sent_late(shard, attempt):
        at = lanes.deadline_at()
        return late_lane(lanes, float("inf") if at is None else at - time.time())
    return lanes.batch


def submission_lane(lanes: DeadlineLanes, submission: Submission) -> Lane:
    """The lane ``submission`` went through (by its batch id's prefix)."""
    if is_flex(submission) and lanes.flex is not None:
        return lanes.flex
    if is_priority(submission) and lanes.priority is not None:
        return lanes.priority
    return lanes.realtime if is_realtime(submission) else lanes.batch


def realtime_twin(
    batch: Wire, storage_root: str, decorations: CallDecorations = NO_DECORATIONS
) -> RealtimeLane:
    """The real-time lane speaking to the same API (base URL, key) as a batch provider, built
    from the registry with its own settings and the job's ``decorations``."""
    twin = batch.capabilities.realtime_twin
    if twin is None:
        raise ConfigError(
            f"--deadline needs a provider with a real-time API to fall back on; "
            f"{batch.provider_name} has none here "
            f"(use {one_of(lambda c: c.realtime_twin is not None)})."
        )
    return _lane(twin, batch, storage_root, decorations)


def _twin(
    twin: str | None, batch: Wire, storage_root: str, kind: Kind, decorations: CallDecorations
) -> RealtimeLane | None:
    """The lane of ``twin`` (a flex or priority tier of ``batch``'s API) when there is one
    serving ``kind``'s requests (a flex tier has no embeddings), or None."""
    if twin is None or kind not in capabilities(twin).kinds:
        return None
    return _lane(twin, batch, storage_root, decorations)


def _lane(twin: str, batch: Wire, storage_root: str, decorations: CallDecorations) -> RealtimeLane:
    """``twin`` on ``batch``'s API, sending the headers the batch provider sends (the team's
    project header among them) and telling the job's early start as it does."""
    provider = build_provider(twin, storage_root=storage_root, **batch.twin_settings())
    if not isinstance(provider, RealtimeProvider):
        raise ConfigError(f"{batch.provider_name}'s twin {twin!r} is not a real-time provider.")
    headers = decorations.headers_for(batch.capabilities.attribution)
    return RealtimeLane(provider.decorated(CallDecorations(headers, sending=decorations.sending)))
