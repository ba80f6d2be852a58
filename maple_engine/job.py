"""A job: one enrichment bound to its storage, provider, prices and cost ledger.

Its callers bind it (the Dagster resources in ``maple_assets``, the command line's driver): a
real-time provider through its lane (`maple_engine.send.lane`), a batch provider with a deadline
with the deadline's lanes beside it (`maple_engine.send.deadline_lanes`)."""

import dataclasses

from maple_engine.ledger.batch_history import BatchLabels
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.model import BatchState, Submission, is_realtime
from maple_engine.policy import RetryPolicy
from maple_engine.providers.base import Lane, Wire
from maple_engine.send.deadline_lanes import DeadlineLanes, attempt_lane, submission_lane
from maple_engine.spec import JobSpec
from maple_engine.state import JobState


@dataclasses.dataclass
class Job:
    """One enrichment job bound to its storage, provider, prices and cost ledger."""

    spec: JobSpec
    state: JobState
    provider: Lane
    costs: CostLedger | None = None
    prices: PriceBook = dataclasses.field(default_factory=PriceBook)
    policy: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    #: A batch job's lanes under its deadline (None: no deadline, ``provider`` sends all).
    deadline: DeadlineLanes | None = None
    _orphans: dict[tuple[str, int], Submission] | None = None

    @property
    def wire(self) -> Wire:
        """What the job's provider is and how its requests look."""
        return self.provider.wire

    @property
    def mode(self) -> str:
        return self.wire.mode

    @property
    def batch_prices(self) -> bool:
        """Whether its attempts are billed at batch prices (a batch or a flex provider)."""
        return self.mode == "batch" or self.wire.capabilities.batch_prices

    def attempt_lane(self, shard: str, attempt: int) -> Lane:
        """The lane ``shard``'s ``attempt`` goes through (a deadline's late lane, or the
        provider's)."""
        if self.deadline is None:
            return self.provider
        return attempt_lane(self.deadline, shard, attempt)

    def submission_lane(self, submission: Submission) -> Lane:
        """The lane a recorded attempt went through."""
        if self.deadline is None:
            return self.provider
        return submission_lane(self.deadline, submission)

    def deadline_due(self) -> bool:
        """Whether the job has a deadline and it is due (its attempts go real-time)."""
        return self.deadline is not None and self.deadline.deadline_due()

    def prepare_submissions(self) -> None:
        """List the provider's batches once, before shards are submitted (maybe in threads)."""
        if self._orphans is None:
            self._orphans = {
                (s.shard, s.attempt): s for s in self.provider.find_orphans(self.spec.name)
            }

    def orphan(self, shard: str, attempt: int) -> Submission | None:
        """The batch the provider holds for ``shard``'s ``attempt`` that no record names (one
        created just before a crash), from one listing of the provider's batches."""
        self.prepare_submissions()
        assert self._orphans is not None
        return self._orphans.get((shard, attempt))

    def forget_orphans(self) -> None:
        """List the provider's batches again at the next `orphan` (a claim was taken over)."""
        self._orphans = None

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        """Poll the provider once for ``submissions`` and record what it said of the batches in
        the batch history (`maple_engine.ledger.batch_history`; real-time attempts are not
        batches and are not recorded)."""
        states: dict[str, BatchState] = {}
        by_lane: dict[int, tuple[Lane, list[Submission]]] = {}
        for sub in submissions:
            lane = self.submission_lane(sub)
            by_lane.setdefault(id(lane), (lane, []))[1].append(sub)
        for lane, subs in by_lane.values():
            states |= lane.poll(subs)
        batches = [s for s in submissions if s.batch_id in states and not is_realtime(s)]
        if self.costs is not None and batches and self.mode == "batch":
            version = self.state.version()
            number = version.number if version else None
            labels = BatchLabels(self.spec.model, self.spec.team, number)
            self.costs.record_batches(labels, [(s, states[s.batch_id]) for s in batches])
        return states

    def price(self) -> ModelPrice:
        return self.prices.price(
            self.spec.model,
            self.wire.provider_name,
            allow_untracked=self.spec.allow_untracked_cost,
        )
