"""Reruns of a file find their changed rows by a digest of the template's columns, kept by each
version, and copy the unchanged rows' answers from the last output: ``maple enrich`` as a
subprocess against a live emulator, counting what it sent."""

from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.server import EmulatorServer
from maple_engine.plan.copied_answers import output_identity
from tests.e2e.test_living import catalog, edit_titles, output, run, sent_by, server

__all__ = ["server"]  # the emulator fixture


def priced(n: int, start: int = 0) -> pl.DataFrame:
    """The catalog with a column the prompt does not use."""
    return catalog(n, start).with_columns(
        pl.int_range(start, start + n).cast(pl.Float64).alias("price")
    )


def first_run(server: EmulatorServer, tmp_path: Path, table: pl.DataFrame) -> tuple[Path, Path]:
    """Enrich ``table`` as job ``catalog``: every row sent. The input and storage paths."""
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    table.write_parquet(source)
    assert sent_by(server, source, storage) == table.height
    return source, storage


@pytest.mark.slow
def test_only_template_column_edits_are_sent_and_every_edit_shows(
    server: EmulatorServer, tmp_path: Path
) -> None:
    first = priced(30)
    source, storage = first_run(server, tmp_path, first)

    edited = edit_titles(first, ["SKU-4"]).with_columns(
        pl.when(pl.col("sku") == "SKU-9").then(99.5).otherwise("price").alias("price"),
        pl.when(pl.col("sku") == "SKU-12").then(pl.lit("SKU-12b")).otherwise("sku").alias("sku"),
    )
    second = pl.concat([edited, priced(2, start=100)])
    second.write_parquet(source)
    assert sent_by(server, source, storage) == 1 + 2  # the title edit and the appended rows

    out = output(source)
    assert out.select(second.columns).equals(second)  # the price and SKU edits show
    assert sorted(out.filter(~pl.col("llm_reused"))["sku"]) == ["SKU-100", "SKU-101", "SKU-4"]
    assert out["llm_response"].to_list() == [
        f"echo: Brand of {t}: {d}" for t, d in second.select("title", "description").iter_rows()
    ]
    assert (storage / "catalog" / "state" / "versions" / "2" / "digests.parquet").exists()
    assert server.stats()["bodies_billed_twice"] == 0

    fresh_source = tmp_path / "fresh" / "items.parquet"
    fresh_source.parent.mkdir()
    second.write_parquet(fresh_source)
    fresh_run = sent_by(server, fresh_source, tmp_path / "fresh" / "store", "--job", "fresh")
    assert fresh_run == 32
    answers = pl.exclude("llm_reused", "llm_batch_id")
    assert_frame_equal(out.select(answers), output(fresh_source).select(answers))


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_a_kill_between_versions_keeps_the_last_complete_digests(
    server: EmulatorServer, tmp_path: Path
) -> None:
    first = catalog(30)
    source, storage = first_run(server, tmp_path, first)

    second = edit_titles(first, ["SKU-2", "SKU-20"])
    second.write_parquet(source)
    before = server.stats()["requests_received"]
    killed = run(server, source, storage, env={"MAPLE_CRASH_AT": "shard_written"})
    assert killed.returncode == -9  # version 2's keys and digests written, nothing sent
    assert server.stats()["requests_received"] == before
    assert (storage / "catalog" / "state" / "versions" / "2" / "digests.parquet").exists()

    third = edit_titles(second, ["SKU-25"])
    third.write_parquet(source)
    assert sent_by(server, source, storage) == 3  # version 2's two edits and the new one
    out = output(source)
    assert out.select(third.columns).equals(third)
    assert sorted(out.filter(~pl.col("llm_reused"))["sku"]) == ["SKU-2", "SKU-20", "SKU-25"]
    assert out["llm_response"].to_list() == [
        f"echo: Brand of {t}: {d}" for t, d in third.select("title", "description").iter_rows()
    ]
    assert server.stats()["bodies_billed_twice"] == 0


def rewrite_output(source: Path, storage: Path, *, adopt: bool) -> None:
    """Upper-case every answer of the last output; ``adopt``: record the rewritten file in
    ``merged.json`` as the one the merge wrote (so a rerun that copies answers from it shows
    the upper-cased ones), else leave the record naming the file as it was written."""
    path = source.with_name(source.stem + "_enriched.parquet")
    pl.read_parquet(path).with_columns(pl.col("llm_response").str.to_uppercase()).write_parquet(
        path
    )
    if adopt:
        merged = storage / "catalog" / "state" / "merged.json"
        record = orjson.loads(merged.read_bytes())
        record["identity"] = output_identity(str(path))
        merged.write_bytes(orjson.dumps(record))


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_unchanged_rows_take_their_answers_from_the_last_output(
    server: EmulatorServer, tmp_path: Path
) -> None:
    first = catalog(30)
    source, storage = first_run(server, tmp_path, first)
    rewrite_output(source, storage, adopt=True)
    second = pl.concat([edit_titles(first, ["SKU-6"]), catalog(1, start=100)])
    second.write_parquet(source)
    assert sent_by(server, source, storage) == 2

    out = output(source)
    assert out.select(second.columns).equals(second)
    fresh = pl.col("sku").is_in(["SKU-6", "SKU-100"])
    # the 29 unchanged rows show the answers of the output they were copied from
    assert out.filter(~fresh)["llm_response"].str.starts_with("ECHO: ").all()
    assert out.filter(fresh)["llm_response"].str.starts_with("echo: ").all()
    assert out.filter(~fresh)["llm_reused"].all()
    assert out.filter(~fresh)["llm_cost_usd"].gt(0).all()  # what they cost when paid
    merged = orjson.loads((storage / "catalog" / "state" / "merged.json").read_bytes())
    assert merged["totals"]["reused"] == 29
    assert merged["totals"]["succeeded"] == 31


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_an_output_changed_since_its_merge_is_not_copied_from(
    server: EmulatorServer, tmp_path: Path
) -> None:
    first = catalog(30)
    source, storage = first_run(server, tmp_path, first)
    rewrite_output(source, storage, adopt=False)  # someone else's edit: the store answers
    second = edit_titles(first, ["SKU-6"])
    second.write_parquet(source)
    assert sent_by(server, source, storage) == 1
    out = output(source)
    assert out["llm_response"].to_list() == [
        f"echo: Brand of {t}: {d}" for t, d in second.select("title", "description").iter_rows()
    ]

    source.with_name(source.stem + "_enriched.parquet").unlink()  # removed: the store answers
    third = edit_titles(second, ["SKU-7"])
    third.write_parquet(source)
    assert sent_by(server, source, storage) == 1
    assert output(source)["llm_response"].to_list() == [
        f"echo: Brand of {t}: {d}" for t, d in third.select("title", "description").iter_rows()
    ]


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_a_csv_input_and_output(server: EmulatorServer, tmp_path: Path) -> None:
    source, storage = tmp_path / "items.csv", tmp_path / "store"
    first = catalog(25)
    first.write_csv(source)
    assert sent_by(server, source, storage) == 25
    second = pl.concat([edit_titles(first, ["SKU-1", "SKU-24"]), catalog(2, start=100)])
    second.write_csv(source)
    assert sent_by(server, source, storage) == 4
    out = pl.read_csv(tmp_path / "items_enriched.csv", infer_schema=False)
    assert out.select(second.columns).equals(second)
    assert out["llm_response"].to_list() == [
        f"echo: Brand of {t}: {d}" for t, d in second.select("title", "description").iter_rows()
    ]
