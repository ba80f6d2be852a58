"""How a job is bound to what it runs on: the Dagster resource keys of an enrichment, and the
engine's `Job` for a spec on those resources (a real-time provider through its lane, a batch
provider with a deadline through the deadline's lanes)."""

from typing import Any

from maple_engine.job import Job
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.policy import RetryPolicy
from maple_engine.providers.base import for_team
from maple_engine.providers.registry import Built
from maple_engine.send.lane import lane_of
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage
from maple_engine.submit.deadline import with_deadline

IO_MANAGER_KEY = "maple_io_manager"
STORAGE_KEY = "maple_storage"
COSTS_KEY = "maple_costs"


def provider_key(provider: str) -> str:
    """The resource key of the provider named ``provider`` (``provider_openai_realtime``)."""
    return "provider_" + provider.replace("-", "_")


def resource_keys(provider: str) -> set[str]:
    """The resources an enrichment on ``provider`` needs."""
    return {STORAGE_KEY, COSTS_KEY, provider_key(provider)}


def job_for(spec: JobSpec, policy: RetryPolicy, resources: Any) -> Job:
    """The job of ``spec`` on a run's or a sensor's resources (``context.resources``: one
    attribute per resource key)."""
    costs: CostLedger = getattr(resources, COSTS_KEY)
    return bind_job(
        spec,
        policy,
        getattr(resources, STORAGE_KEY).storage(),
        getattr(resources, provider_key(spec.provider)),
        costs=costs,
        prices=PriceBook(costs.prices),
    )


def bind_job(
    spec: JobSpec,
    policy: RetryPolicy,
    storage: Storage,
    provider: Built,
    *,
    costs: CostLedger | None,
    prices: PriceBook,
) -> Job:
    """The job of ``spec`` on ``storage`` and ``provider`` (sending the job's headers, and its
    extra fields on the control calls, attributed to its team's accounts)."""
    configured = provider.with_headers(spec.headers).with_extra_body(spec.extra_body)
    sending = lane_of(for_team(configured, spec.team))
    return Job(
        spec=spec,
        state=JobState(storage, spec.name),
        provider=with_deadline(sending, storage, spec.name, spec.deadline_s, spec.kind),
        costs=costs,
        prices=prices,
        policy=policy,
    )
