"""A job: one enrichment bound to its storage, provider, prices and cost ledger."""

import dataclasses
from typing import Any

from maple_engine.ledger.batch_history import BatchLabels
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.model import BatchState, Submission, is_realtime
from maple_engine.plan.cache_layout import check_cache_price
from maple_engine.policy import RetryPolicy
from maple_engine.providers.base import Provider
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage
from maple_engine.submit.deadline import with_deadline


@dataclasses.dataclass
class Job:
    """One enrichment job bound to its storage, provider, prices and cost ledger."""

    spec: JobSpec
    state: JobState
    provider: Provider
    costs: CostLedger | None = None
    prices: PriceBook = dataclasses.field(default_factory=PriceBook)
    policy: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    _orphans: dict[tuple[str, int], Submission] | None = None

    @property
    def mode(self) -> str:
        return self.provider.mode

    @property
    def batch_prices(self) -> bool:
        """Whether its attempts are billed at batch prices (a batch or a flex provider)."""
        return self.mode == "batch" or self.provider.capabilities.batch_prices

    def prepare_submissions(self) -> None:
        """List the provider's batches once, before shards are submitted (maybe in threads)."""
        if self._orphans is None:
            self._orphans = {
                (s.shard, s.attempt): s for s in self.provider.find_orphans(self.spec.name)
            }

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        """Poll the provider once for ``submissions`` and record what it said of the batches in
        the batch history (`maple_engine.ledger.batch_history`; real-time attempts are not
        batches and are not recorded)."""
        states = self.provider.poll(submissions) if submissions else {}
        batches = [s for s in submissions if s.batch_id in states and not is_realtime(s)]
        if self.costs is not None and batches and self.mode == "batch":
            version = self.state.version()
            number = version.number if version else None
            labels = BatchLabels(self.spec.model, self.spec.team, number)
            self.costs.record_batches(labels, [(s, states[s.batch_id]) for s in batches])
        return states

    def price(self) -> ModelPrice:
        price = self.prices.price(
            self.spec.model,
            self.provider.provider_name,
            allow_untracked=self.spec.allow_untracked_cost,
        )
        check_cache_price(self.spec, price)
        return price


IO_MANAGER_KEY = "maple_io_manager"


def provider_key(provider: str) -> str:
    return "provider_" + provider.replace("-", "_")


def job_for(spec: JobSpec, policy: RetryPolicy, resources: Any) -> Job:
    storage = resources.maple_storage.storage()
    provider = getattr(resources, provider_key(spec.provider))
    costs = resources.maple_costs
    return bound_job(spec, policy, storage, provider, costs=costs, prices=PriceBook(costs.prices))


def bound_job(
    spec: JobSpec,
    policy: RetryPolicy,
    storage: Storage,
    provider: Provider,
    *,
    costs: CostLedger | None,
    prices: PriceBook,
) -> Job:
    """The job of ``spec`` on ``storage`` and ``provider`` (wrapped to meet its deadline)."""
    return Job(
        spec=spec,
        state=JobState(storage, spec.name),
        provider=with_deadline(provider, storage, spec.name, spec.deadline_s),
        costs=costs,
        prices=prices,
        policy=policy,
    )
