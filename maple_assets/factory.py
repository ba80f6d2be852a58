"""``enrichment()`` and ``embedding()``: declare a job and get its partitioned asset graph.

    NAME/input_shards  ->  NAME/submissions [per shard]  ->  NAME/raw_responses [per shard]
                                                                   ->  NAME/merged

A sensor polls the provider (one call per tick) and requests ``submissions`` and
``raw_responses`` runs per shard with deterministic run keys, then ``merged`` once every shard is
final. Resource keys: ``maple_storage``, ``maple_costs``, ``maple_io_manager`` and one provider
resource per provider name (``provider_key(provider)``).
"""

import dataclasses
import warnings
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

import dagster as dg

from maple_assets.binding import resource_keys
from maple_assets.declaration import Declared, declare_job
from maple_assets.graph.assets import (
    input_shards_asset,
    merged_asset,
    raw_responses_asset,
    submissions_asset,
)
from maple_assets.graph.card import card, declared_at
from maple_assets.graph.checks import build_checks
from maple_assets.graph.distill import DistillJobs, distill_rows_asset, distilled_asset
from maple_assets.graph.distill_sensor import distill_sensor
from maple_assets.graph.names import JobKeys, dagster_name
from maple_assets.graph.observed import file_watch, observed_file
from maple_assets.graph.sensors import enrichment_sensor
from maple_engine.distill.plan import embedding_spec
from maple_engine.errors import ConfigError
from maple_engine.model import EMBEDDING
from maple_engine.policy import RetryPolicy
from maple_engine.spec import DEFAULTS, JobSpec, build_spec
from partitions.shards import shard_partitions


@dataclasses.dataclass(frozen=True)
class Enrichment:
    """What ``enrichment()`` returns: put its assets, sensors and checks in Definitions."""

    spec: JobSpec
    assets: list["dg.AssetsDefinition | dg.SourceAsset"]  # an observed input file first
    sensor: dg.SensorDefinition
    checks: list[dg.AssetChecksDefinition]
    partitions_def: dg.DynamicPartitionsDefinition
    policy: RetryPolicy
    key_of: JobKeys  # the asset keys of the job's graph
    watch: dg.SensorDefinition | None = None  # records the input file's changes (a file)
    distill: "DistillGraph | None" = None  # a distilled job's two jobs' graphs

    @property
    def merged(self) -> dg.AssetsDefinition:
        merged = self.assets[-1]
        assert isinstance(merged, dg.AssetsDefinition)
        return merged

    @property
    def merged_key(self) -> dg.AssetKey:
        return self.key_of("merged")

    def key(self, asset: str) -> dg.AssetKey:
        return self.key_of(asset)

    @property
    def sensors(self) -> list[dg.SensorDefinition]:
        if self.distill is not None:
            graph = self.distill
            return [*graph.embed.sensors, *graph.llm.sensors, graph.sensor]
        return [self.sensor, *([self.watch] if self.watch is not None else [])]

    @property
    def providers(self) -> set[str]:
        """The providers the job sends to (a distilled job's embeddings may use another)."""
        spec = self.spec
        return {
            spec.provider,
            *([spec.distill_provider] if spec.distill and spec.distill_provider else []),
        }

    @property
    def resource_keys(self) -> set[str]:
        return set().union(*(resource_keys(p) for p in self.providers))


@dataclasses.dataclass(frozen=True)
class DistillGraph:
    """A distilled job's graph (``maple_assets.graph.distill``): its embedding job's, its LLM
    job's (``distill_rows`` first: its input) and the ``distilled`` output asset's key."""

    embed: Enrichment
    llm: Enrichment
    distilled: dg.AssetKey
    sensor: dg.SensorDefinition  # asks for the next round and the output (the daemon's way)


def enrichment(
    name: str,
    source: "str | dg.AssetsDefinition | dg.AssetKey | dg.SourceAsset",
    prompt: str,
    model: str,
    *,
    provider: str = DEFAULTS.provider,
    team: str = DEFAULTS.team,
    system: str | None = DEFAULTS.system,
    params: dict[str, Any] | None = None,
    max_requests_per_batch: int = DEFAULTS.max_requests_per_batch,
    max_batch_bytes: int = DEFAULTS.max_batch_bytes,
    response_schema: Any = DEFAULTS.response_schema,
    image_column: str | None = DEFAULTS.image_column,
    file_columns: list[str] | None = None,
    output: str | None = DEFAULTS.output,
    retries: dict[str, int] | None = None,
    budget_usd: float | None = DEFAULTS.budget_usd,
    allow_untracked_cost: bool = DEFAULTS.allow_untracked_cost,
    max_failed_share: float = DEFAULTS.max_failed_share,
    error_failed_share: float = DEFAULTS.error_failed_share,
    check_images: bool = DEFAULTS.check_images,
    poll_interval_s: int = 30,
    group: str | None = None,
    key_prefix: list[str] | None = None,
    blocking: bool = False,
    reuse: bool = DEFAULTS.reuse,
    max_enqueued_tokens: int | None = DEFAULTS.max_enqueued_tokens,
    priority: int = DEFAULTS.priority,
    deadline: "str | float | timedelta | None" = DEFAULTS.deadline_s,
    target_hours: float | None = DEFAULTS.target_hours,
    stall_percentile: float = DEFAULTS.stall_percentile,
    canary: int | None = DEFAULTS.canary,
    canary_min_success: float = DEFAULTS.canary_min_success,
    cache: Literal["auto", "off"] = DEFAULTS.cache,
    endpoint: Literal["chat", "responses"] = DEFAULTS.endpoint,
    distill: bool = DEFAULTS.distill,
    distill_embedding_model: str = DEFAULTS.distill_embedding_model,
    distill_provider: str | None = DEFAULTS.distill_provider,
    distill_dimensions: int | None = DEFAULTS.distill_dimensions,
    distill_sample: int = DEFAULTS.distill_sample,
    distill_agreement: float = DEFAULTS.distill_agreement,
    headers: dict[str, str] | None = None,
    extra_body: dict[str, Any] | None = None,
) -> Enrichment:
    """Declare an enrichment: ``source`` is an upstream asset or a CSV/Parquet path or URI.

    The keywords are the job options of ``maple_engine.spec.JobSpec`` by name (defaults, bounds
    and help there; a test holds this signature to it): ``params``, ``retries`` and
    ``file_columns`` take None for empty, ``headers`` (a gateway's, on every request; never
    stored) and ``extra_body`` (a gateway's fields of the batch control calls; never stored)
    None for none,
    ``deadline`` ("6h", seconds or a timedelta) is ``deadline_s``'s alias,
    ``response_schema`` a dict, a pydantic model class or a JSON file's path.
    ``poll_interval_s`` is the sensor's minimum interval, ``group`` the assets' group (the job's
    name by default), ``key_prefix`` path elements before every asset key of the job (None: the
    keys are ``[name, asset]``), ``blocking`` makes merged's ``failed_rows`` check a blocking one (a
    failure at ERROR stops merged's downstream assets in the same run)."""
    return _declare(**locals())


def embedding(
    name: str,
    source: "str | dg.AssetsDefinition | dg.AssetKey | dg.SourceAsset",
    text: str,
    model: str,
    *,
    dimensions: int | None = DEFAULTS.dimensions,
    provider: str = DEFAULTS.provider,
    team: str = DEFAULTS.team,
    params: dict[str, Any] | None = None,
    max_requests_per_batch: int = DEFAULTS.max_requests_per_batch,
    max_batch_bytes: int = DEFAULTS.max_batch_bytes,
    output: str | None = DEFAULTS.output,
    retries: dict[str, int] | None = None,
    budget_usd: float | None = DEFAULTS.budget_usd,
    allow_untracked_cost: bool = DEFAULTS.allow_untracked_cost,
    max_failed_share: float = DEFAULTS.max_failed_share,
    error_failed_share: float = DEFAULTS.error_failed_share,
    poll_interval_s: int = 30,
    group: str | None = None,
    key_prefix: list[str] | None = None,
    blocking: bool = False,
    reuse: bool = DEFAULTS.reuse,
    max_enqueued_tokens: int | None = DEFAULTS.max_enqueued_tokens,
    priority: int = DEFAULTS.priority,
    deadline: "str | float | timedelta | None" = DEFAULTS.deadline_s,
    target_hours: float | None = DEFAULTS.target_hours,
    stall_percentile: float = DEFAULTS.stall_percentile,
    canary: int | None = DEFAULTS.canary,
    canary_min_success: float = DEFAULTS.canary_min_success,
    headers: dict[str, str] | None = None,
    extra_body: dict[str, Any] | None = None,
) -> Enrichment:
    """Declare an embedding: one vector per row of ``source`` (``llm_embedding``, Parquet).

    The same four-stage asset graph, sensor and checks as ``enrichment()``; ``text`` is a
    template over the columns like a prompt, ``dimensions`` the vectors' length (models that
    can shorten theirs). The other keywords are ``enrichment()``'s."""
    return _declare(kind=EMBEDDING, **locals())


def _declare(
    source: Any,
    poll_interval_s: int,
    group: str | None,
    key_prefix: list[str] | None,
    blocking: bool,
    **options: Any,
) -> Enrichment:
    """A job's spec from the keywords of ``enrichment()`` or ``embedding()`` (their job
    options by name) over ``source`` (a path, or an upstream asset: no source in the spec),
    checked, and its asset graph, sensor and checks."""
    spec = build_spec(source=source if isinstance(source, str) else None, **options)
    shown = GraphOptions(poll_interval_s, group, blocking, tuple(key_prefix or ()))
    if spec.distill:
        return distilled_graph(declare_job(spec), source, shown, declared_at(2))
    return graph_of(declare_job(spec), source, shown, declared_at(2))


@dataclasses.dataclass(frozen=True)
class GraphOptions:
    """How the job's graph shows in Dagster, beside the job's own options: the sensor's
    minimum interval, the assets' group (None: the job's Dagster name), whether merged's
    failed_rows check blocks, the path elements before every asset key of the job, whether
    merged also depends on input_shards (a distilled job's jobs: a backfill's run of both,
    fresh, then cuts the shards before merged waits for them)."""

    poll_interval_s: int = 30
    group: str | None = None
    blocking: bool = False
    key_prefix: tuple[str, ...] = ()
    merged_after_input: bool = False


def graph_of(
    job: Declared,
    source: Any,
    options: GraphOptions = GraphOptions(),
    metadata: Mapping[str, Any] | None = None,
) -> Enrichment:
    """The asset graph, sensor and checks of a checked job over ``source``; ``metadata``: more
    definition metadata of its assets (the code reference of its declaration)."""
    spec, policy = job.spec, job.policy
    name = spec.name
    group = options.group or dagster_name(name)
    pdef = shard_partitions(dagster_name(name))
    keys = resource_keys(spec.provider)
    key_of = JobKeys(name, options.key_prefix)
    observed = (
        [observed_file(key_of("input_file"), source, group)] if isinstance(source, str) else []
    )
    upstream = observed[0].key if observed else _source_key(source)
    with warnings.catch_warnings():  # single-run backfill policies are Beta in dagster 1.13
        warnings.simplefilter("ignore", dg.BetaWarning)
        built = [
            input_shards_asset(spec, policy, pdef, keys, upstream, key_of=key_of),
            submissions_asset(spec, policy, pdef, keys, key_of),
            raw_responses_asset(spec, policy, pdef, keys, key_of),
            merged_asset(
                spec,
                policy,
                keys,
                key_of,
                poll_interval_s=options.poll_interval_s,
                upstream=upstream,
                after_input=options.merged_after_input,
            ),
        ]
        formats = ["parquet"] * 3 + [spec.output_format()]  # merged is the output file
        assets = [
            _carded(asset, spec, fmt, metadata or {}, group)
            for asset, fmt in zip(built, formats, strict=True)
        ]
        assets[-1] = assets[-1].map_asset_specs(lambda s: _fresh(s, spec))
    sensor = enrichment_sensor(spec, policy, assets, keys, options.poll_interval_s)
    checks = build_checks(spec, keys, key_of, None if observed else upstream, options.blocking)
    watch = (
        file_watch(upstream, source, f"{dagster_name(name)}_watch")
        if isinstance(source, str)
        else None
    )
    return Enrichment(spec, [*observed, *assets], sensor, checks, pdef, policy, key_of, watch)


def _carded(
    asset: dg.AssetsDefinition,
    spec: JobSpec,
    stored_as: str,
    metadata: Mapping[str, Any],
    group: str,
) -> dg.AssetsDefinition:
    """``asset`` with the job's kinds, owner, group and more definition metadata."""

    def merged(asset_spec: dg.AssetSpec) -> dg.AssetSpec:
        carded = asset_spec.merge_attributes(**card(spec, stored_as), metadata=metadata)
        return carded.replace_attributes(group_name=group)

    return asset.map_asset_specs(merged)


_SHORTEST_FRESHNESS_WINDOW_S = 60.0  # FreshnessPolicy.time_window refuses a fail_window < 1 min


def _fresh(asset_spec: dg.AssetSpec, spec: JobSpec) -> dg.AssetSpec:
    """merged with a freshness policy from the job's deadline, where it has one: merged
    more than the deadline old shows as failing its freshness (overdue) in the UI. Dagster's
    window is at least a minute, so a shorter deadline is shown as a one-minute window."""
    if spec.deadline_s is None:
        return asset_spec
    window = timedelta(seconds=max(spec.deadline_s, _SHORTEST_FRESHNESS_WINDOW_S))
    return asset_spec.replace_attributes(
        freshness_policy=dg.FreshnessPolicy.time_window(fail_window=window)
    )


def _source_key(source: Any) -> dg.AssetKey:
    if isinstance(source, dg.AssetKey):
        return source
    if isinstance(source, dg.AssetsDefinition):
        return source.key
    return source.key  # type: ignore[no-any-return]


def distilled_graph(
    job: Declared, source: Any, options: GraphOptions, metadata: Mapping[str, Any]
) -> Enrichment:
    """A distilled job's graph: its embedding job's over ``source`` (a file), ``distill_rows``,
    its LLM job's over ``distill_rows`` and ``distilled`` (``maple_assets.graph.distill``)."""
    spec = job.spec
    if not isinstance(source, str):
        raise ConfigError(
            f"{spec.name}: distill=True reads its input from a file: give source= a CSV or "
            "Parquet path or URI, not an upstream asset."
        )
    if options.key_prefix:
        raise ConfigError(
            f"{spec.name}: key_prefix is not taken with distill=True: declare the distilled job "
            f"without key_prefix (its assets sit under {dagster_name(spec.name)}/ and "
            f"{dagster_name(spec.name)}-embeddings/)."
        )
    embed = declare_job(embedding_spec(spec, None))
    llm = declare_job(spec.model_copy(update={"distill": False, "source": None, "output": None}))
    jobs = DistillJobs(spec, embed.spec, embed.policy, llm.spec, llm.policy)
    group = options.group or dagster_name(spec.name)
    shown = dataclasses.replace(options, group=group, merged_after_input=True)
    keys = set().union(resource_keys(embed.spec.provider), resource_keys(spec.provider))
    rows = distill_rows_asset(jobs, keys, group)
    embedded = graph_of(embed, source, shown, metadata)
    answered = graph_of(llm, rows.key, shown, metadata)
    answered = dataclasses.replace(answered, assets=[rows, *answered.assets])
    distilled = distilled_asset(jobs, keys, group, options.poll_interval_s)
    sensor = distill_sensor(spec.name, embed.spec.name, interval=options.poll_interval_s)
    return dataclasses.replace(
        answered,
        spec=spec,
        assets=[*embedded.assets, *answered.assets, distilled],
        checks=[*embedded.checks, *answered.checks],
        watch=embedded.watch,
        distill=DistillGraph(embedded, answered, distilled.key, sensor),
    )
