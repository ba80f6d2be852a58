"""The code location: the example grocery enrichment and embedding, a downstream asset of each,
and their resources, with the enrichments declared in YAML under ``maple_assets/defs/`` (the
sample has one, ``product_tags``, an ``EnrichmentComponent``).

The example runs on OpenAI's Batch API when ``OPENAI_API_KEY`` is set, else on the local
emulator (start it with ``maple emulator``; ``MAPLE_EMULATOR_URL`` overrides its address). The
key is the provider resource's ``dg.EnvVar("OPENAI_API_KEY")``: the UI shows the variable's name,
the run reads its value (``maple_assets.wiring``).

``maple_automation`` is the code location's automation sensor, running by default: assets with
an automation condition downstream of an enrichment (``category_report``) refresh when its
``merged`` does, under ``dagster dev`` and in a deployment, without a click. Stop it in the UI
(Automation), or declare it with ``default_status=dg.DefaultSensorStatus.STOPPED``. It also
re-reads ``grocery_catalog`` when ``catalog_watch`` has recorded an edit of the sample's CSV file
(``grocery_catalog_file``; the watch looks every minute and launches no run), which shows the
enrichment's ``input_shards`` stale (nothing is sent until someone materializes it).

``maple_job`` (``maple_assets.rpc``) takes ad-hoc jobs from applications: its run config is a
job spec, launched over Dagster's GraphQL API.
"""

import warnings
from pathlib import Path

import dagster as dg
import polars as pl

from maple_assets import defs as maple_defs
from maple_assets.factory import embedding, enrichment
from maple_assets.graph.batch_stats import batch_stats_asset
from maple_assets.graph.observed import file_watch, observed_file
from maple_assets.graph.reconcile import reconcile_asset
from maple_assets.near_duplicates import near_duplicate_pairs
from maple_assets.rpc import maple_job
from maple_assets.wiring import billing_resource, maple_resources
from maple_engine.plan.versions import input_digest
from maple_engine.settings import Settings

HERE = Path(__file__).parent
SAMPLE_CATALOG = HERE / "data" / "grocery_catalog.csv"

grocery_catalog_file = observed_file(
    dg.AssetKey("grocery_catalog_file"), str(SAMPLE_CATALOG), group="catalog"
)
grocery_catalog_watch = file_watch(grocery_catalog_file.key, str(SAMPLE_CATALOG), "catalog_watch")


@dg.asset(
    group_name="catalog",
    deps=[grocery_catalog_file],
    automation_condition=dg.AutomationCondition.eager(),  # re-read when the file changes
    description="A few hundred synthetic grocery items (sample data).",
)
def grocery_catalog() -> dg.Output[pl.DataFrame]:
    # The file's digest as data version: re-reading an unchanged file changes nothing downstream.
    version = dg.DataVersion(input_digest(str(SAMPLE_CATALOG)))
    with warnings.catch_warnings():  # data_version is Beta: said by every run otherwise
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.Output(pl.read_csv(SAMPLE_CATALOG, infer_schema=False), data_version=version)


PROVIDER = "openai" if Settings.load().has_api_key("openai") else "emulator"

product_attributes = enrichment(
    name="product_attributes",
    source=grocery_catalog,
    prompt="Extract the brand and the pack size from this grocery item: {title} / {description}",
    system="You are a precise catalog assistant. Answer briefly.",
    model="gpt-4o-mini",
    provider=PROVIDER,
    team="catalog",
    max_requests_per_batch=100,
    poll_interval_s=4,
)

catalog_vectors = embedding(
    name="catalog_vectors",
    source=grocery_catalog,
    text="{title}",
    model="text-embedding-3-small",
    dimensions=256,
    provider=PROVIDER,
    team="catalog",
    max_requests_per_batch=100,
    poll_interval_s=4,
)


@dg.asset(
    group_name="reports",  # catalog -> product_attributes -> reports: the graph reads left to right
    ins={"enriched": dg.AssetIn(key=product_attributes.merged_key)},
    io_manager_key="maple_io_manager",
    automation_condition=dg.AutomationCondition.eager(),  # refreshes when merged does
    description="Enriched items per category: how many, how many answered, what it cost.",
)
def category_report(enriched: pl.LazyFrame) -> pl.DataFrame:
    return (
        enriched.group_by("category")
        .agg(
            pl.len().alias("items"),
            (pl.col("llm_status") == "succeeded").sum().alias("answered"),
            pl.col("llm_cost_usd").cast(pl.Float64).sum().alias("cost_usd"),
        )
        .sort("category")
        .collect()
    )


@dg.asset(
    group_name="reports",
    ins={"vectors": dg.AssetIn(key=catalog_vectors.merged_key)},
    io_manager_key="maple_io_manager",
    automation_condition=dg.AutomationCondition.eager(),
    description="Pairs of catalog items whose title vectors nearly coincide (cosine similarity "
    ">= 0.95): likely duplicate listings to merge.",
)
def near_duplicates(vectors: pl.LazyFrame) -> pl.DataFrame:
    return near_duplicate_pairs(vectors.select("sku", "llm_embedding").collect(), key="sku")


ENRICHMENTS = [product_attributes, catalog_vectors]
# The two maintenance assets are not partitioned, so the global "Materialize all" needs no
# choice of days: each run covers yesterday and today (maple_assets/graph/recent_days.py).
# Daily batch statistics (turnaround, tasks/s, charts) from the ledger's batch history.
maple_batch_stats = batch_stats_asset()
# Daily: the ledger against OpenAI's own usage and cost reports, automated only when the code
# location has the admin key (OPENAI_ADMIN_KEY); without it a run skips it, saying so.
billing = billing_resource("openai")
maple_reconcile = reconcile_asset(automate=billing.admin_key is not None)

with warnings.catch_warnings():  # Dagster marks the parameter beta: said by every process
    warnings.simplefilter("ignore", dg.BetaWarning)
    everything = dg.AssetSelection.all(include_sources=True)  # observes the input files too
automation = dg.AutomationConditionSensorDefinition(
    "maple_automation",
    target=everything,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Evaluates the automation conditions of this code location's assets.",
)


def python_definitions() -> dg.Definitions:
    """The jobs, assets and resources declared in Python above (a function: Dagster loads a
    module that holds one ``Definitions`` object at module scope)."""
    return dg.Definitions(
        assets=[
            grocery_catalog_file,
            grocery_catalog,
            *product_attributes.assets,
            category_report,
            *catalog_vectors.assets,
            near_duplicates,
            maple_batch_stats,
            maple_reconcile,
        ],
        asset_checks=[*product_attributes.checks, *catalog_vectors.checks],
        sensors=[
            *product_attributes.sensors,
            *catalog_vectors.sensors,
            grocery_catalog_watch,
            automation,
        ],
        jobs=[maple_job()],  # applications run ad-hoc jobs over Dagster's GraphQL API
        resources=maple_resources(ENRICHMENTS) | {"maple_billing": billing},
        # Each step in the run's own process: a step process per asset (and per check) loads
        # the code location again, seconds per run on a small job; the work itself is I/O.
        executor=dg.in_process_executor,
    )


# The components under maple_assets/defs/ (`dg list defs` shows them), loaded from the package
# itself, so that an installed copy with no pyproject.toml beside it loads them too; their
# resources are the same objects as these (maple_assets.wiring), so the two merge.
with warnings.catch_warnings():  # Dagster's own code references and loaders are beta/preview
    warnings.simplefilter("ignore", dg.BetaWarning)
    warnings.simplefilter("ignore", dg.PreviewWarning)
    components = dg.ComponentTree.from_module(defs_module=maple_defs, project_root=HERE.parent)
    defs = dg.Definitions.merge(python_definitions(), components.build_defs())
