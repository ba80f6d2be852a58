"""The code location: the example grocery enrichment and embedding, a downstream asset of each,
and their resources.

The example runs on OpenAI's Batch API when ``OPENAI_API_KEY`` is set, else on the local
emulator (start it with ``maple emulator``; ``MAPLE_EMULATOR_URL`` overrides its address). The
key is the provider resource's ``dg.EnvVar("OPENAI_API_KEY")``: the UI shows the variable's name,
the run reads its value (``maple_assets.wiring``).

``maple_automation`` is the code location's automation sensor, running by default: assets with
an automation condition downstream of an enrichment (``category_report``) refresh when its
``merged`` does, under ``dagster dev`` and in a deployment, without a click. Stop it in the UI
(Automation), or declare it with ``default_status=dg.DefaultSensorStatus.STOPPED``.
"""

from pathlib import Path

import dagster as dg
import polars as pl

from maple_assets.factory import embedding, enrichment
from maple_assets.near_duplicates import near_duplicate_pairs
from maple_assets.wiring import maple_resources
from maple_engine.settings import Settings

SAMPLE_CATALOG = Path(__file__).parent / "data" / "grocery_catalog.csv"


@dg.asset(group_name="catalog", description="A few hundred synthetic grocery items (sample data).")
def grocery_catalog() -> pl.DataFrame:
    return pl.read_csv(SAMPLE_CATALOG, infer_schema=False)


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
    poll_interval_s=10,
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
    poll_interval_s=10,
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

automation = dg.AutomationConditionSensorDefinition(
    "maple_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Evaluates the automation conditions of this code location's assets.",
)

defs = dg.Definitions(
    assets=[
        grocery_catalog,
        *product_attributes.assets,
        category_report,
        *catalog_vectors.assets,
        near_duplicates,
    ],
    asset_checks=[*product_attributes.checks, *catalog_vectors.checks],
    sensors=[*product_attributes.sensors, *catalog_vectors.sensors, automation],
    resources=maple_resources(ENRICHMENTS),
)
