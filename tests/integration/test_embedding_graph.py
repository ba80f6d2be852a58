"""``embedding()`` through Dagster's machinery: the four-stage graph materialized shard by shard
as the sensor asks, its checks, and a downstream asset finding near-duplicates in the vectors."""

from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from emulator.server import EmulatorServer
from maple_assets.factory import embedding
from maple_assets.near_duplicates import near_duplicate_pairs
from maple_assets.wiring import maple_resources
from tests.integration.test_graph import run_graph


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("emulator", "text-embedding-3-small"),
        pytest.param("gemini", "gemini-embedding-001", marks=pytest.mark.slow),
    ],
)
def test_embedding_graph_and_a_near_duplicates_asset(
    tmp_path: Path, emulator_server: EmulatorServer, monkeypatch: Any, provider: str, model: str
) -> None:
    monkeypatch.setenv("MAPLE_EMULATOR_URL", emulator_server.url)
    monkeypatch.setenv("GEMINI_BASE_URL", emulator_server.url)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    titles = [f"item {i}" for i in range(20)] + ["item 3", "item 11"]  # two repeats

    @dg.asset
    def catalog() -> pl.DataFrame:
        return pl.DataFrame({"sku": [f"S{i:02d}" for i in range(len(titles))], "title": titles})

    en = embedding(
        name="catalog_vectors",
        source=catalog,
        text="{title}",
        model=model,
        dimensions=16,
        provider=provider,
        max_requests_per_batch=6,
    )
    assert [a.key.to_user_string() for a in en.assets] == [
        "catalog_vectors/input_shards",
        "catalog_vectors/submissions",
        "catalog_vectors/raw_responses",
        "catalog_vectors/merged",
    ]

    @dg.asset(ins={"vectors": dg.AssetIn(key=en.merged_key)}, io_manager_key="maple_io_manager")
    def near_duplicates(vectors: pl.LazyFrame) -> pl.DataFrame:
        return near_duplicate_pairs(vectors.collect(), key="sku")

    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    with dg.instance_for_test() as instance:
        launched = run_graph(en, [catalog], resources, instance)
        assert any(":submit:" in k for k in launched)  # one run per shard, or one chained run
        submitted = instance.get_materialized_partitions(en.key("submissions"))
        assert len(submitted) == 4  # 22 rows / 6 per shard
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(en.merged_key, "every_row_once")]
        )
        assert len(checks) == 1
        assert all(record.status.value == "SUCCEEDED" for record in checks.values())
        pairs = dg.materialize(
            [catalog, *en.assets, near_duplicates],
            selection=[near_duplicates.key],
            instance=instance,
            resources=resources,
        ).output_for_node("near_duplicates")
    assert pairs.select("key_a", "key_b").rows() == [("S03", "S20"), ("S11", "S21")]
    assert pairs["similarity"].min() > 0.999
    output = pq.read_table(en.spec.output or _merged_path(tmp_path))
    assert output.schema.field("llm_embedding").type == pa.list_(pa.float32(), 16)
    assert output.num_rows == len(titles)
    assert set(output.column("llm_model").to_pylist()) == {model}


def _merged_path(root: Path) -> str:
    return str(next((root / "store" / "catalog_vectors" / "output").glob("merged.*")))
