"""How a job is bound to what it runs on: the Dagster resource keys of an enrichment, and the
engine's `Job` for a spec on those resources (a real-time provider through its lane, a batch
provider with a deadline with the deadline's lanes), and the job's call decorations."""

import threading
from collections.abc import Mapping
from typing import Any

from maple_engine.job import Job
from maple_engine.ledger.costs import CostLedger
from maple_engine.ledger.price_book import PriceBook
from maple_engine.policy import RetryPolicy
from maple_engine.providers.decorations import CallDecorations, decorations_for
from maple_engine.providers.registry import Built
from maple_engine.send.deadline_lanes import deadline_lanes
from maple_engine.send.lane import lane_of
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage

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


def job_decorations(
    provider: Built,
    *,
    headers: Mapping[str, str] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    team: str | None = None,
    sending: threading.Event | None = None,
) -> CallDecorations:
    """What a job adds to ``provider``'s calls: its headers, its extra control-call fields
    (a `ConfigError` where the provider takes none), its team's accounts in the provider's
    team attribution map (a bad map: a `ConfigError`) and the early start's ``sending``."""
    return decorations_for(
        provider.provider_name,
        takes_extra_body=provider.capabilities.takes_extra_body,
        control_fields=provider.capabilities.control_fields,
        attribution=provider.attribution_map(),
        headers=headers,
        extra_body=extra_body,
        team=team,
        sending=sending,
    )


def spec_decorations(
    spec: JobSpec, provider: Built, sending: threading.Event | None = None
) -> CallDecorations:
    """What ``spec``'s job adds to ``provider``'s calls (`JobSpec.call_decorations`)."""
    return spec.call_decorations(
        provider.provider_name,
        takes_extra_body=provider.capabilities.takes_extra_body,
        control_fields=provider.capabilities.control_fields,
        attribution=provider.attribution_map(),
        sending=sending,
    )


def bind_job(
    spec: JobSpec,
    policy: RetryPolicy,
    storage: Storage,
    provider: Built,
    *,
    costs: CostLedger | None,
    prices: PriceBook,
    sending: threading.Event | None = None,
) -> Job:
    """The job of ``spec`` on ``storage`` and ``provider`` (sending the job's headers, and its
    extra fields on the control calls, attributed to its team's accounts; ``sending`` is set
    when a request of a real-time attempt leaves)."""
    decorations = spec_decorations(spec, provider, sending)
    lane = lane_of(provider.decorated(decorations))
    deadline = None
    if spec.deadline_s is not None and lane.wire.mode == "batch":  # no fallback: fails here
        deadline = deadline_lanes(
            lane, storage, spec.name, spec.deadline_s, spec.kind, decorations=decorations
        )
    return Job(
        spec=spec,
        state=JobState(storage, spec.name),
        provider=lane,
        costs=costs,
        prices=prices,
        policy=policy,
        deadline=deadline,
    )
