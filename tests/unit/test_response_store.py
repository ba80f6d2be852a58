"""The response store as the one copy of a shard's final answers."""

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from maple_engine.collect.responses import (
    RESPONSE_COLUMNS,
    combine_attempts,
    stored_responses,
    with_final,
)
from maple_engine.model import CUSTOM_ID, KEY, ROW_ID
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.response_store import BUCKETS, ResponseStore, by_bucket, collection
from maple_engine.storage.storage import Storage


def records(
    rows: list[int], keys: list[str], status: str = "succeeded", resendable: bool | None = None
) -> pl.DataFrame:
    n = len(rows)
    return pl.DataFrame(
        {
            ROW_ID: rows,
            CUSTOM_ID: [f"r{r}" for r in rows],
            KEY: keys,
            "custom_id": [f"r{r}" for r in rows],
            "status": [status] * n,
            "failure_class": [None] * n,
            "error": [None] * n,
            "resendable": [resendable] * n,
            "response": [f"answer {r}" for r in rows],
            "billed": [True] * n,
            "input_tokens": [3] * n,
            "cached_input_tokens": [0] * n,
            "cache_write_tokens": [0] * n,
            "output_tokens": [2] * n,
            "reasoning_tokens": [1] * n,
            "tokens_estimated": [False] * n,
            "batch_id": ["b1"] * n,
            "parsed": [None] * n,
            "attempt": [1] * n,
            "attempts": [1] * n,
            "cost_usd": [0.5] * n,
        },
        schema_overrides={
            "failure_class": pl.String,
            "error": pl.String,
            "resendable": pl.Boolean,
            "parsed": pl.String,
        },
    )


def test_a_collection_run_again_replaces_its_files_in_every_bucket(tmp_path: Path) -> None:
    store = ResponseStore(Storage(str(tmp_path)), "job")
    name = collection("s00000", 1)
    store.write(name, records([0, 1], ["a" * 32, "b" * 32]), "m")
    store.write(name, records([1], ["b" * 32]), "m")  # the rerun made row 0 pending instead
    assert store.collected([name])[ROW_ID].to_list() == [1]
    store.write(name, records([], []), "m")
    assert store.collected([name]).is_empty()


def test_a_shards_responses_are_its_stored_rows_and_its_pending_ones(tmp_path: Path) -> None:
    store = ResponseStore(Storage(str(tmp_path)), "job")
    store.write(collection("s00000", 1), records([2, 0], ["c" * 32, "0" * 32]), "m")
    final = stored_responses(store.collected([collection("s00000", 1)]))
    pending = records([1], ["1" * 32], status="failed").with_columns(pl.lit(2).alias("attempts"))
    responses = with_final(final, pending.select(RESPONSE_COLUMNS)).sort(ROW_ID)  # no row order
    assert responses.columns == RESPONSE_COLUMNS
    assert responses[ROW_ID].to_list() == [0, 1, 2]
    assert responses["status"].to_list() == ["succeeded", "failed", "succeeded"]
    assert responses["attempts"].to_list() == [1, 2, 1]


def test_a_store_file_from_before_reasoning_tokens_reads_them_as_not_reported(
    tmp_path: Path,
) -> None:
    """A store written by a Maple that did not keep reasoning tokens nor ``resendable``: its
    records read back, by key and by collection, with those null (not reported; the failure
    class's retries decide), not an error."""
    storage = Storage(str(tmp_path))
    store = ResponseStore(storage, "job")
    store.write("s00000-a1", records([0, 1], ["a1", "b2"], resendable=False), "gpt-4o-mini")
    key = JobLayout("job").store_file("s00000-a1")
    old = storage.read_parquet(key).drop("reasoning_tokens", "tokens_estimated")
    storage.write_parquet(key, old.drop("resendable"))
    scanned = pl.concat([store.scan(b).collect() for b in "ab"])
    assert scanned["reasoning_tokens"].to_list() == [None, None]
    assert scanned["tokens_estimated"].to_list() == [None, None]
    assert scanned["resendable"].to_list() == [None, None]
    collected = store.collected(["s00000-a1"])
    assert collected.height == 2 and collected["reasoning_tokens"].null_count() == 2
    assert collected["resendable"].null_count() == 2
    assert stored_responses(collected)["resendable"].null_count() == 2


def test_a_rows_resendable_mark_is_stored_and_read_back(tmp_path: Path) -> None:
    store = ResponseStore(Storage(str(tmp_path)), "job")
    store.write("s00000-a1", records([0], ["a1"], "failed", resendable=False), "m")
    assert store.scan("a").collect()["resendable"].to_list() == [False]
    final = stored_responses(store.collected(["s00000-a1"]))
    assert final["resendable"].to_list() == [False]
    assert store.best("a", pl.LazyFrame({KEY: ["a1"]}))["resendable"].to_list() == [False]


def test_a_results_file_from_before_resendable_combines_with_null(tmp_path: Path) -> None:
    """A shard's pending rows written by an older Maple (``results-n`` without the column)
    combine with a new attempt's and read back as shard responses, ``resendable`` null."""
    older = records([0], ["a1"], "failed").drop(KEY, "resendable")
    newer = (
        records([1], ["b2"], "failed", resendable=False)
        .drop(KEY)
        .with_columns(pl.lit(2, pl.Int64).alias("attempt"))
    )
    combined = combine_attempts([older, newer])
    assert combined["resendable"].to_list() == [None, False]
    assert with_final(None, older)["resendable"].to_list() == [None]


def test_a_collections_file_holds_a_row_group_per_key_bucket_in_bucket_order(
    tmp_path: Path,
) -> None:
    """A lookup of one bucket reads that bucket's row group of each file: each group holds
    one bucket's records, in bucket order, the rows of a bucket in the order written."""
    store = ResponseStore(Storage(str(tmp_path)), "job")
    keys = ["b1" + "0" * 30, "0a" + "0" * 30, "b0" + "0" * 30, "f" * 32, "0b" + "0" * 30]
    store.write("s00000-a1", records([0, 1, 2, 3, 4], keys), "m")
    found = pq.ParquetFile(tmp_path / JobLayout("job").store_file("s00000-a1"))
    groups = [found.read_row_group(i, columns=[KEY])[KEY].to_pylist() for i in range(3)]
    assert found.num_row_groups == 3
    assert groups == [[keys[1], keys[4]], [keys[0], keys[2]], [keys[3]]]
    assert store.scan("b").collect()[KEY].to_list() == [keys[0], keys[2]]
    assert store.scan("1").collect().is_empty()


def test_a_collection_stored_as_a_file_per_bucket_is_read_and_replaced(tmp_path: Path) -> None:
    """A collection an earlier Maple stored as one file per key bucket is read by key and by
    collection; writing that collection again leaves only the new file (no record twice)."""
    storage = Storage(str(tmp_path))
    store = ResponseStore(storage, "job")
    paths = JobLayout("job")
    written = records([0, 1], ["a" * 32, "b" * 32])
    store.write("s00000-a1", written, "m")
    whole = storage.read_parquet(paths.store_file("s00000-a1"))
    storage.delete(paths.store_file("s00000-a1"))
    for part in by_bucket(whole):
        storage.write_parquet(paths.store_bucket_file(str(part[KEY][0])[0], "s00000-a1"), part)
    assert store.holds_records()
    assert sorted(store.collected(["s00000-a1"])[ROW_ID].to_list()) == [0, 1]
    assert store.scan("b").collect()[KEY].to_list() == ["b" * 32]
    assert store.best("a", pl.LazyFrame({KEY: ["a" * 32]}))["response"].to_list() == ["answer 0"]
    store.write("s00000-a1", records([1], ["b" * 32]), "m")  # its rerun made row 0 pending
    assert store.collected(["s00000-a1"])[ROW_ID].to_list() == [1]
    assert [store.scan(b).collect().height for b in BUCKETS] == [0] * 11 + [1] + [0] * 4
    assert not any(storage.list_keys(paths.store_bucket(b)) for b in "ab")


def test_an_empty_store_holds_no_records(tmp_path: Path) -> None:
    store = ResponseStore(Storage(str(tmp_path)), "job")
    assert not store.holds_records()
    assert store.scan("0").collect().is_empty()
    store.write("s00000-a1", records([], []), "m")  # an attempt that made nothing final
    assert not store.holds_records()
    assert store.collected(["s00000-a1"]).is_empty()
    store.write("s00000-a2", records([0], ["0" * 32]), "m")
    assert store.holds_records()
