"""S3 end to end against moto's S3 server on 127.0.0.1 (the real S3 API over HTTP), and the
round trip, a job killed and resumed, and a job with everything on S3 against SeaweedFS too
(``s3_store``: a real store)."""

import os
import subprocess
import sys
from pathlib import Path

import boto3
import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.server import EmulatorServer
from maple_engine.storage.storage import Storage
from resources.io_manager import ParquetIOManager
from tests.conftest import BUCKET


def keys(prefix: str = "") -> list[str]:
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [obj["Key"] for page in pages for obj in page.get("Contents", [])]


def test_storage_round_trip(s3_store: dict[str, str]) -> None:
    storage = Storage(f"s3://{BUCKET}/root")
    storage.write_json("job/state/a.json", {"x": 1})
    assert storage.exists("job/state/a.json") and not storage.exists("job/state/b.json")
    storage.write_parquet("job/state/t.parquet", pl.DataFrame({"x": [1, 2]}))
    assert storage.read_parquet("job/state/t.parquet")["x"].to_list() == [1, 2]
    assert storage.list_keys("job/state") == ["job/state/a.json", "job/state/t.parquet"]
    storage.delete("job/state/a.json")
    assert not storage.exists("job/state/a.json")
    assert sorted(keys("root/")) == ["root/job/state/t.parquet"]


def test_io_manager_on_s3(s3: dict[str, str]) -> None:
    parts = dg.StaticPartitionsDefinition(["a", "b"])

    @dg.asset(partitions_def=parts, io_manager_key="io")
    def numbers(context: dg.AssetExecutionContext) -> pl.DataFrame:
        return pl.DataFrame({"part": [context.partition_key] * 3, "n": [1, 2, 3]})

    @dg.asset(io_manager_key="io", ins={"numbers": dg.AssetIn()})
    def total(numbers: dict[str, pl.DataFrame]) -> pl.DataFrame:
        return (
            pl.concat(list(numbers.values())).group_by("part").agg(pl.col("n").sum()).sort("part")
        )

    resources = {"io": ParquetIOManager(root=f"s3://{BUCKET}/io")}
    with dg.instance_for_test() as instance:
        for key in ("a", "b"):
            assert dg.materialize(
                [numbers], partition_key=key, resources=resources, instance=instance
            ).success
        result = dg.materialize(
            [numbers, total], selection=[total], resources=resources, instance=instance
        )
    assert result.output_for_node("total")["n"].to_list() == [6, 6]
    assert sorted(keys("io/")) == [
        "io/numbers/a.parquet",
        "io/numbers/b.parquet",
        "io/total.parquet",
    ]


def enrich_on_s3(
    env: dict[str, str],
    tmp_path: Path,
    emulator: EmulatorServer,
    *,
    per_batch: str = "2",
    job: tuple[str, ...] = ("--job", "s3job"),
    cwd: Path | None = None,
    **extra_env: str,
) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        **env,
        **extra_env,
        "MAPLE_EMULATOR_URL": emulator.url,
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "MAPLE_COST_DB": f"sqlite:///{tmp_path}/costs.db",
    }
    (tmp_path / "dagster").mkdir(exist_ok=True)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "maple_assets.cli",
            "enrich",
            f"s3://{BUCKET}/in/tricky.csv",
            "--prompt",
            "{title} / {description}",
            "--model",
            "gpt-4o-mini",
            "--provider",
            "emulator",
            "--storage",
            f"s3://{BUCKET}/store",
            "--output",
            f"s3://{BUCKET}/out/enriched.parquet",
            *job,
            "--max-requests-per-batch",
            per_batch,
            "--poll-interval",
            "0.1",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd or tmp_path,
        timeout=300,
        check=False,
    )


# One crash point on moto in the default suite; the others, and all three on SeaweedFS, in the
# slow pass (~20-30 s each).
@pytest.mark.parametrize(
    ("store", "point"),
    [
        ("s3", "after_create"),
        pytest.param("s3", "after_results", marks=pytest.mark.slow),
        pytest.param("s3", "mid_merge", marks=pytest.mark.slow),
        *(
            pytest.param("seaweedfs", point, marks=pytest.mark.slow)
            for point in ("after_create", "after_results", "mid_merge")
        ),
    ],
)
def test_resume_after_kill_with_state_on_s3(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tricky_table: pl.DataFrame,
    store: str,
    point: str,
) -> None:
    s3_store: dict[str, str] = request.getfixturevalue(store)
    storage = Storage(f"s3://{BUCKET}")
    storage.write_bytes("in/tricky.csv", tricky_table.write_csv().encode())
    with EmulatorServer() as emulator:
        killed = enrich_on_s3(s3_store, tmp_path, emulator, MAPLE_CRASH_AT=point)
        assert killed.returncode == -9, killed.stderr
        again = enrich_on_s3(s3_store, tmp_path, emulator)
        assert again.returncode == 0, again.stderr
        stats = emulator.stats()
    assert stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == tricky_table.height
    out = storage.read_parquet("out/enriched.parquet")
    assert_frame_equal(out.select(tricky_table.columns), tricky_table)
    assert out["llm_status"].to_list() == ["succeeded"] * 6
    assert out["llm_attempts"].to_list() == [1] * 6


@pytest.mark.slow
def test_cli_with_everything_on_s3(
    s3_store: dict[str, str], tmp_path: Path, tricky_table: pl.DataFrame
) -> None:
    storage = Storage(f"s3://{BUCKET}")
    storage.write_bytes("in/tricky.csv", tricky_table.write_csv().encode())
    work = tmp_path / "cwd"
    work.mkdir()
    with EmulatorServer() as emulator:
        result = enrich_on_s3(s3_store, tmp_path, emulator, per_batch="4", job=(), cwd=work)
        assert result.returncode == 0, result.stderr
        assert emulator.stats()["bodies_billed_twice"] == 0
    out = storage.read_parquet("out/enriched.parquet")
    assert_frame_equal(out.select(tricky_table.columns), tricky_table)
    assert out["llm_status"].to_list() == ["succeeded"] * 6
    stored = keys("store/")
    assert any(k.endswith("state/manifest.json") for k in stored)
    assert sum("/state/shards/" in k for k in stored) == 2
    local_parquet = [p for p in work.rglob("*.parquet")] + [p for p in tmp_path.rglob("*.parquet")]
    assert local_parquet == []


@pytest.mark.slow  # ~35 s: runs in CI's slow pass (pytest -m slow)
def test_response_store_on_s3_sends_only_new_rows(
    s3: dict[str, str], tmp_path: Path, tricky_table: pl.DataFrame
) -> None:
    storage = Storage(f"s3://{BUCKET}")
    storage.write_bytes("in/tricky.csv", tricky_table.write_csv().encode())
    grown = pl.concat([tricky_table, tricky_table.with_columns(pl.col("sku") + "-2")])
    grown = grown.with_columns(
        pl.when(pl.int_range(pl.len()) >= 6)
        .then(pl.concat_str([pl.lit("new "), pl.col("title").fill_null("")]))
        .otherwise(pl.col("title"))
        .alias("title")
    )
    with EmulatorServer() as emulator:
        assert enrich_on_s3(s3, tmp_path, emulator).returncode == 0
        storage.write_bytes("in/tricky.csv", grown.write_csv().encode())
        again = enrich_on_s3(s3, tmp_path, emulator)
        assert again.returncode == 0, again.stderr
        stats = emulator.stats()
    assert stats["requests_received"] == 12 and stats["bodies_billed_twice"] == 0
    assert any("/store/" in k for k in keys("store/s3job/store/"))
    out = storage.read_parquet("out/enriched.parquet")
    assert_frame_equal(out.select(grown.columns), grown)
    assert out["llm_reused"].to_list() == [True] * 6 + [False] * 6
