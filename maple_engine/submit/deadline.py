"""Deadlines: rows still in batches when a job's deadline approaches go through real-time.

``--deadline 6h`` (``deadline=`` on ``enrichment()``) counts from the start of the job's current
version. When ``deadline - margin`` arrives (the margin is a tenth of the deadline, at least 1 s
and at most 30 minutes: time for the cancels to settle and the real-time calls to run), the
sensor cancels the job's batches still running (the provider returns what already ran; only
unrun rows come back ``batch_cancelled``), and every shard attempt sent from then on, the unrun
rows and shards never sent alike, goes to the provider's real-time API, paced to its rate limits
like the real-time providers. Their cost is recorded at real-time prices.

Where the provider has a flex twin (real-time answers at batch prices, slower: OpenAI's
``openai-flex``), attempts go there first while the time left before the deadline is at least
the flex provider's request timeout (15 minutes by default); later ones use standard real-time.
"""

import re
import time
from typing import Any

from maple_engine.errors import ConfigError, ProviderError
from maple_engine.model import (
    BatchState,
    Submission,
    is_flex,
    is_realtime,
)
from maple_engine.providers.base import ShardPayload
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, what: str = "--deadline") -> float:
    """``90s``, ``30m``, ``6h``, ``1h30m``, ``2d`` -> seconds; anything else a ConfigError."""
    clean = text.strip().lower().replace(" ", "")
    parts = _PART.findall(clean)
    if not clean or "".join(n + u for n, u in parts) != clean:
        raise ConfigError(
            f"{what} {text!r} is not a duration: write a number with a unit, s/m/h/d, e.g. 90s, "
            "30m, 6h or 1h30m."
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ConfigError(f"{what} {text!r} must be longer than zero.")
    return seconds


def margin(duration_s: float) -> float:
    """How long before the deadline the batches are cancelled and real-time takes over."""
    return min(max(0.1 * duration_s, 1.0), 1800.0)


def realtime_twin(batch: Any, storage_root: str) -> Any:
    """The real-time provider speaking to the same API (base URL, key) as a batch provider."""
    from maple_engine.providers.registry import build_provider, one_of

    twin = batch.capabilities.realtime_twin
    if twin is None:
        raise ConfigError(
            f"--deadline needs a provider with a real-time API to fall back on; "
            f"{batch.provider_name} has none here "
            f"(use {one_of(lambda c: c.realtime_twin is not None)})."
        )
    return build_provider(
        twin, storage_root=storage_root, base_url=batch.base_url, api_key=batch.api_key
    )


def flex_twin(batch: Any, storage_root: str) -> Any:
    """The batch-priced real-time provider of ``batch``'s API (its flex tier), or None."""
    from maple_engine.providers.registry import build_provider

    twin = batch.capabilities.flex_twin
    if twin is None:
        return None
    return build_provider(
        twin, storage_root=storage_root, base_url=batch.base_url, api_key=batch.api_key
    )


class DeadlineProvider:
    """A batch provider that sends attempts through its real-time twin once the deadline is due.

    Everything else (names, limits, encodings, orphans) is the batch provider's."""

    def __init__(self, batch: Any, storage: Storage, job: str, duration_s: float) -> None:
        self.batch_provider = batch
        self.storage = storage
        self.job = job
        self.duration_s = duration_s
        self._realtime: Any = None
        self._flex: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.batch_provider, name)

    @property
    def realtime(self) -> Any:
        if self._realtime is None:
            self._realtime = realtime_twin(self.batch_provider, self.storage.root)
        return self._realtime

    @property
    def flex(self) -> Any:
        if self._flex is None:
            self._flex = flex_twin(self.batch_provider, self.storage.root) or False
        return self._flex or None

    def late_provider(self) -> Any:
        """Flex while the time left allows one of its (slow) requests, else real-time."""
        flex, at = self.flex, self.deadline_at()
        if flex is not None and at is not None and at - time.time() >= flex.timeout_s:
            return flex
        return self.realtime

    def _sender(self, submission: Submission) -> Any:
        if is_flex(submission):
            return self.flex
        return self.realtime if is_realtime(submission) else self.batch_provider

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

    def submit(self, payload: ShardPayload) -> Submission:
        if self.deadline_due() or self.escalated(payload.shard, payload.attempt):
            return self.late_provider().submit(payload)  # type: ignore[no-any-return]
        return self.batch_provider.submit(payload)  # type: ignore[no-any-return]

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        states: dict[str, BatchState] = {}
        by_sender: dict[int, tuple[Any, list[Submission]]] = {}
        for sub in submissions:
            sender = self._sender(sub)
            by_sender.setdefault(id(sender), (sender, []))[1].append(sub)
        for sender, subs in by_sender.values():
            states |= sender.poll(subs)
        return states

    def results(self, submission: Submission, state: BatchState) -> Any:
        return self._sender(submission).results(submission, state)

    def cancel(self, submission: Submission) -> None:
        if not is_realtime(submission):
            self.batch_provider.cancel(submission)


def with_deadline(batch: Any, storage: Storage, job: str, duration_s: float | None) -> Any:
    """The job's provider: ``batch`` itself, or wrapped to meet the deadline."""
    if duration_s is None or getattr(batch, "mode", "batch") != "batch":
        return batch
    realtime_twin(batch, storage.root)  # a provider with no real-time API fails here, early
    return DeadlineProvider(batch, storage, job, duration_s)


def cancel_for_deadline(job: Any, states: list[tuple[Submission, BatchState]]) -> list[str]:
    """Cancel the job's batches still running (once each); the ids cancelled now."""
    cancelled = []
    for sub, state in states:
        if state.ended or is_realtime(sub) or state.status in ("cancelling", "canceling"):
            continue
        marker = job.state.paths.deadline_cancel(sub.shard, sub.attempt)
        if cancel_once(job, sub, marker, {"batch_id": sub.batch_id, "at": time.time()}):
            cancelled.append(sub.batch_id)
    return cancelled


def cancel_once(job: Any, sub: Submission, marker: str, record: dict[str, Any]) -> bool:
    """Cancel ``sub``'s batch unless ``marker`` says it was, then write ``record`` there."""
    if job.state.storage.exists(marker):
        return False
    try:
        job.provider.cancel(sub)
    except ProviderError as exc:
        if exc.status != 400:  # 400: it ended meanwhile; its results are collected as usual
            raise
    job.state.storage.write_json(marker, record)
    return True


def deadline_split(costs: Any, job: str, shards: set[str], price: Any) -> dict[str, Any]:
    """How the run's billed rows went (batch / real-time) and what the real-time ones cost,
    with the premium over the same usage at batch prices (what the deadline cost)."""
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
    return {
        "batch_rows": sum(e.requests for e in entries if e.mode == "batch"),
        "realtime_rows": sum(e.requests for e in late),
        "realtime_cost_usd": round(paid, 6),
        "deadline_cost_usd": round(paid - at_batch, 6),
    }
