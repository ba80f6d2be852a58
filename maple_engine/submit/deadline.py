"""Deadlines: rows still in batches when a job's deadline approaches go through real-time.

``--deadline 6h`` (``deadline=`` on ``enrichment()``) counts from the start of the job's current
version. When ``deadline - margin`` arrives (the margin is a tenth of the deadline, at least 1 s
and at most 30 minutes: time for the cancels to settle and the real-time calls to run), the
sensor cancels the job's batches still running (the provider returns what already ran; only
unrun rows come back ``batch_cancelled``), and every shard attempt sent from then on, the unrun
rows and shards never sent alike, goes to the provider's real-time API, paced to its rate limits
like the real-time providers. Their cost is recorded at real-time prices.

The late lanes, in order, each only while it can still meet the deadline: where the provider
has a flex twin (real-time answers at batch prices, slower: OpenAI's ``openai-flex``), attempts
go there while the time left before the deadline is at least the flex provider's request
timeout (15 minutes by default); then standard real time while at least a tenth of the margin
is left (a hundredth of the deadline, at most 3 minutes); then, where the provider has a
priority twin (OpenAI's ``openai-priority``: ``service_tier: "priority"``, faster, twice the
standard price), the priority tier for that last part and past the deadline. Priority attempts
are booked at the tier's price, and the run's summary shows their rows and what they cost over
standard real time (`deadline_split`).

Shards waiting for the provider's queue do not wait for the deadline to be due: one that could
not end as a batch in time goes through the late lanes at once (`maple_engine.submit.escalation`).
"""

import time
from typing import Any, Literal

import polars as pl

from maple_engine.errors import ConfigError, ProviderError
from maple_engine.model import (
    BatchState,
    Kind,
    Submission,
    is_flex,
    is_priority,
    is_realtime,
    priority_priced,
)
from maple_engine.providers.base import (
    Lane,
    ShardPayload,
    Wire,
)
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


def flex_twin(
    batch: Wire, storage_root: str, kind: Kind, decorations: CallDecorations
) -> RealtimeLane | None:
    """The batch-priced real-time lane of ``batch``'s API (its flex tier) when it serves
    ``kind``'s requests (a flex tier has no embeddings), or None."""
    twin = batch.capabilities.flex_twin
    if twin is None or kind not in capabilities(twin).kinds:
        return None
    return _lane(twin, batch, storage_root, decorations)


def priority_twin(
    batch: Wire, storage_root: str, kind: Kind, decorations: CallDecorations
) -> RealtimeLane | None:
    """The priority tier's lane of ``batch``'s API when it has one for ``kind``, or None."""
    twin = batch.capabilities.priority_twin
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


class DeadlineProvider:
    """A batch provider whose attempts go through its real-time lanes once the deadline is due
    (flex first while a flex request still fits, then standard real time, then priority).

    What the provider is (names, limits, encodings, orphans) is the batch provider's."""

    def __init__(
        self,
        batch: Lane,
        storage: Storage,
        job: str,
        duration_s: float,
        kind: Kind,
        *,
        decorations: CallDecorations = NO_DECORATIONS,
    ) -> None:
        self.batch = batch
        self.storage = storage
        self.job = job
        self.duration_s = duration_s
        self.kind = kind
        self.realtime = realtime_twin(batch.wire, storage.root, decorations)
        self.flex = flex_twin(batch.wire, storage.root, kind, decorations)
        self.priority = priority_twin(batch.wire, storage.root, kind, decorations)

    @property
    def wire(self) -> Wire:
        """The batch provider's: names, limits, encodings."""
        return self.batch.wire

    def check_endpoint(self) -> None:
        self.batch.check_endpoint()

    def find_orphans(self, job: str) -> list[Submission]:
        return self.batch.find_orphans(job)

    def close(self) -> None:
        self.batch.close()

    # -- which lane sends -------------------------------------------------------------------
    def late_provider(self) -> RealtimeLane:
        """Flex while the time left allows one of its (slow) requests, standard real time
        while at least a tenth of the margin is left, then the priority tier (where there is
        one)."""
        at = self.deadline_at()
        left = float("inf") if at is None else at - time.time()
        if self.flex is not None and left >= self.flex.wire.timeout_s:
            return self.flex
        if self.priority is not None and left < PRIORITY_SHARE * margin(self.duration_s):
            return self.priority
        return self.realtime

    def _sender(self, submission: Submission) -> Lane:
        if is_flex(submission) and self.flex is not None:
            return self.flex
        if is_priority(submission) and self.priority is not None:
            return self.priority
        return self.realtime if is_realtime(submission) else self.batch

    def deadline_at(self) -> float | None:
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

    def submit(self, payload: ShardPayload) -> Submission:
        shard, attempt = payload.shard, payload.attempt
        if self.deadline_due() or self.escalated(shard, attempt) or self.sent_late(shard, attempt):
            return self.late_provider().submit(payload)
        return self.batch.submit(payload)

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        states: dict[str, BatchState] = {}
        by_sender: dict[int, tuple[Lane, list[Submission]]] = {}
        for sub in submissions:
            sender = self._sender(sub)
            by_sender.setdefault(id(sender), (sender, []))[1].append(sub)
        for sender, subs in by_sender.values():
            states |= sender.poll(subs)
        return states

    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        return self._sender(submission).results(submission, state)

    def cancel(self, submission: Submission) -> None:
        if not is_realtime(submission):
            self.batch.cancel(submission)


def with_deadline(
    provider: Lane,
    storage: Storage,
    job: str,
    duration_s: float | None,
    kind: Kind,
    *,
    decorations: CallDecorations = NO_DECORATIONS,
) -> Lane:
    """The job's provider: ``provider`` itself, or a batch provider wrapped to meet the
    deadline (one with no real-time API to fall back on fails here, early) for a job of
    ``kind``, its twins making their calls with the job's ``decorations``."""
    if duration_s is None or provider.wire.mode != "batch":
        return provider
    return DeadlineProvider(provider, storage, job, duration_s, kind, decorations=decorations)


def deadline_due(provider: Lane) -> bool:
    """Whether ``provider`` is a deadline's and the deadline is due (its attempts go real-time)."""
    return isinstance(provider, DeadlineProvider) and provider.deadline_due()


def batch_of(provider: Lane) -> Lane:
    """The batch provider behind a deadline's lanes (``provider`` itself when it has none)."""
    return provider.batch if isinstance(provider, DeadlineProvider) else provider


def cancel_for_deadline(job: Any, states: list[tuple[Submission, BatchState]]) -> list[str]:
    """Cancel the job's batches still running (once each); the ids cancelled now."""
    cancelled = []
    for sub, state in states:
        if state.ended or is_realtime(sub) or state.status in ("cancelling", "canceling"):
            continue
        if cancel_once(job, sub, "deadline", {"batch_id": sub.batch_id, "at": time.time()}):
            cancelled.append(sub.batch_id)
    return cancelled


def cancel_once(
    job: Any, sub: Submission, why: Literal["deadline", "stall"], record: dict[str, Any]
) -> bool:
    """Cancel ``sub``'s batch for ``why`` unless it was, then keep ``record`` as the mark."""
    if job.state.cancel_record(why, sub.shard, sub.attempt) is not None:
        return False
    try:
        job.provider.cancel(sub)
    except ProviderError as exc:
        if exc.status != 400:  # 400: it ended meanwhile; its results are collected as usual
            raise
    job.state.write_cancel_record(why, sub.shard, sub.attempt, record)
    return True


def deadline_split(costs: Any, job: str, shards: set[str], price: Any) -> dict[str, Any]:
    """How the run's billed rows went (batch / real-time) and what the real-time ones cost,
    with the premium over the same usage at batch prices (what the deadline cost); of the
    real-time rows, those on the priority tier, what they cost and how much more than at
    standard real-time prices."""
    from maple_engine.ledger.pricing import TokenUsage, cost_usd

    entries = [
        e for e in (costs.job_entries(job) if costs is not None else []) if e.shard in shards
    ]
    late = [e for e in entries if e.mode == "realtime"]
    paid = sum(e.cost_usd for e in late)
    usage = TokenUsage(
        input_tokens=sum(e.input_tokens for e in late),
        cached_input_tokens=sum(e.cached_input_tokens for e in late),
        output_tokens=sum(e.output_tokens for e in late),
    )
    at_batch = cost_usd(price, usage, True) if late and price is not None else paid
    priority = [e for e in late if e.batch_id is not None and priority_priced(e.batch_id)]
    priority_paid = sum(e.cost_usd for e in priority)
    return {
        "batch_rows": sum(e.requests for e in entries if e.mode == "batch"),
        "realtime_rows": sum(e.requests for e in late),
        "realtime_cost_usd": round(paid, 6),
        "deadline_cost_usd": round(paid - at_batch, 6),
        "priority_rows": sum(e.requests for e in priority),
        "priority_cost_usd": round(priority_paid, 6),
        "priority_premium_usd": round(
            priority_paid - sum(e.realtime_cost_usd for e in priority), 6
        ),
    }
