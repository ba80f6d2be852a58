"""A version's per-row digests of the template's columns: unchanged rows keep the earlier
version's request key without being rendered again; every other row is rendered."""

from pathlib import Path

import polars as pl
import pytest

from maple_engine.errors import ConfigError
from maple_engine.inputs.sources import iter_blocks
from maple_engine.job import Job
from maple_engine.ledger.price_book import PriceBook
from maple_engine.model import KEY, ROW_ID, Version
from maple_engine.plan.changed_rows import spill_keys
from maple_engine.plan.row_digests import digest_columns, earlier_digests, row_digests
from maple_engine.plan.sharding import prepare_block
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage
from scripts.make_file_samples import pdf_bytes

PROMPT = "Brand of {title}: {description}"
POISON = "f" * 32  # a key no rendered row has: a row showing it kept the earlier version's key


def spec_for(prompt: str = PROMPT) -> JobSpec:
    return JobSpec(
        name="items",
        prompt=prompt,
        model="gpt-4o-mini",
        provider="emulator",
        max_batch_bytes=10_000,
    )


def items(n: int = 20) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "sku": [f"SKU-{i}" for i in range(n)],
            "title": [f"Item {i}" for i in range(n)],
            "description": [f"about item {i}" for i in range(n)],
            "price": [float(i) for i in range(n)],
        }
    )


def job_at(tmp_path: Path, spec: JobSpec | None = None) -> Job:
    spec = spec or spec_for()
    state = JobState(Storage(str(tmp_path / "root")), spec.name)
    return Job(
        spec=spec, state=state, provider=OpenAIBatchProvider(name="emulator"), prices=PriceBook()
    )


def cut(job: Job, table: pl.DataFrame, path: Path, number: int, group: int = 7) -> pl.DataFrame:
    """Pass 1 of version ``number`` over ``table`` (written with row groups of ``group`` rows,
    so blocks and the earlier digests' batches do not line up); the spilled keys by row id."""
    table.write_parquet(path, row_group_size=group)
    version = Version(number=number, fingerprint=job.spec.fingerprint(), input_digest=str(number))
    spill_keys(job, str(path), version)
    return spilled(job, number)


def spilled(job: Job, number: int) -> pl.DataFrame:
    folder = JobLayout(job.spec.name).version_keys_dir(number)
    keys = [job.state.storage.read_parquet(k) for k in job.state.storage.list_keys(folder)]
    return pl.concat(keys).sort(ROW_ID)


def rendered(job: Job, table: pl.DataFrame) -> pl.DataFrame:
    """Every row's key, rendered from scratch."""
    blocks = [prepare_block(b, 0, job.spec, job.provider) for b in iter_blocks(table)]
    return pl.concat(blocks).select(ROW_ID, KEY)


def poison(job: Job, number: int) -> None:
    """Replace every key of version ``number``'s spill with ``POISON``."""
    storage = job.state.storage
    folder = JobLayout(job.spec.name).version_keys_dir(number)
    for key in storage.list_keys(folder):
        storage.write_parquet(
            key, storage.read_parquet(key).with_columns(pl.lit(POISON).alias(KEY))
        )


def test_digests_follow_the_template_columns_only() -> None:
    spec = spec_for()
    assert digest_columns(spec) == ["title", "description"]
    table = items(3)
    before = row_digests(table, digest_columns(spec))
    other = table.with_columns(pl.lit("SKU-x").alias("sku"), pl.lit(9.0).alias("price"))
    assert (row_digests(other, digest_columns(spec)) == before).all()
    edited = table.with_columns(pl.Series("title", ["Item 0", "Item 1 (new)", "Item 2"]))
    assert (row_digests(edited, digest_columns(spec)) == before).tolist() == [True, False, True]
    image = spec.model_copy(update={"image_column": "sku"})
    assert digest_columns(image) == ["title", "description", "sku"]
    shown = spec.model_copy(update={"image_column": "title"})  # the template shows it too
    assert digest_columns(shown) == ["title", "description"]
    assert (row_digests(table, digest_columns(shown)) == before).all()


def test_unchanged_rows_keep_the_earlier_key_and_changed_rows_are_rendered(
    tmp_path: Path,
) -> None:
    job = job_at(tmp_path)
    first = items(20)
    assert cut(job, first, tmp_path / "in.parquet", 1).equals(rendered(job, first))
    poison(job, 1)  # from here, a row whose key is POISON was not rendered again

    edited = first.with_columns(
        pl.when(pl.col("sku") == "SKU-3")
        .then(pl.lit("Item 3 (new)"))
        .otherwise("title")
        .alias("title"),
        pl.when(pl.col("sku") == "SKU-5").then(pl.lit(55.0)).otherwise("price").alias("price"),
    )
    second = pl.concat([edited, items(23).tail(3)])
    keys = cut(job, second, tmp_path / "in.parquet", 2, group=5)
    fresh = rendered(job, second)
    assert keys[ROW_ID].to_list() == list(range(23))
    poisoned = keys.filter(pl.col(KEY) == POISON)[ROW_ID].to_list()
    # the edited title and the 3 appended rows are rendered; the price edit is not a change
    assert poisoned == [i for i in range(20) if i != 3]
    assert keys.filter(pl.col(KEY) != POISON).equals(
        fresh.filter(pl.col(ROW_ID).is_in([3, 20, 21, 22]))
    )


def test_a_row_moved_by_a_deletion_above_it_is_rendered(tmp_path: Path) -> None:
    job = job_at(tmp_path)
    first = items(12)
    cut(job, first, tmp_path / "in.parquet", 1)
    poison(job, 1)
    fewer = first.filter(pl.col("sku") != "SKU-8")
    keys = cut(job, fewer, tmp_path / "in.parquet", 2)
    assert keys.filter(pl.col(KEY) == POISON)[ROW_ID].to_list() == list(range(8))
    assert keys.filter(pl.col(ROW_ID) >= 8).equals(rendered(job, fewer).filter(pl.col(ROW_ID) >= 8))


def test_other_settings_or_column_types_render_every_row(tmp_path: Path) -> None:
    job = job_at(tmp_path)
    first = items(10)
    cut(job, first, tmp_path / "in.parquet", 1)
    poison(job, 1)
    other = job_at(tmp_path, spec_for("Size of {title}: {description}"))
    assert earlier_digests(other.state.storage, other.spec, 2) is None
    assert cut(other, first, tmp_path / "in.parquet", 2).equals(rendered(other, first))

    job = job_at(tmp_path / "types")
    numbered = items(10).with_columns(pl.int_range(10).alias("description"))
    cut(job, numbered, tmp_path / "in.parquet", 1)
    poison(job, 1)
    as_text = numbered.with_columns(pl.col("description").cast(pl.String))
    assert cut(job, as_text, tmp_path / "in.parquet", 2).equals(rendered(job, as_text))


def test_a_version_that_failed_while_cut_leaves_the_last_complete_digests(tmp_path: Path) -> None:
    job = job_at(tmp_path)
    first = items(20)
    cut(job, first, tmp_path / "in.parquet", 1)
    poison(job, 1)
    storage = job.state.storage
    # version 2 fails on a row too large to send, after some blocks were spilled and digested
    huge = first.with_columns(
        pl.when(pl.col("sku") == "SKU-18")
        .then(pl.lit("x" * 20_000))
        .otherwise("title")
        .alias("title")
    )
    with pytest.raises(ConfigError, match="Row 18 renders a request"):
        cut(job, huge, tmp_path / "in.parquet", 2)
    assert not storage.exists(JobLayout("items").version_digests(2))  # none without its spill
    assert earlier_digests(storage, job.spec, 3) is not None
    # version 3 takes version 1's: the unchanged rows keep version 1's keys
    keys = cut(job, first, tmp_path / "in.parquet", 3)
    assert keys.filter(pl.col(KEY) != POISON).is_empty()
    assert keys[ROW_ID].to_list() == list(range(20))


def test_a_file_row_is_digested_by_its_files_bytes_not_their_paths(tmp_path: Path) -> None:
    """A file rewritten with the same bytes, or moved under the same name, keeps its row's
    earlier key (its request would be the same); a file with new bytes is rendered again."""
    folder = tmp_path / "files"
    folder.mkdir()
    paths = [folder / f"sheet{i}.pdf" for i in range(5)]
    for i, path in enumerate(paths):
        path.write_bytes(pdf_bytes([f"sheet {i}"]))
    spec = spec_for("Summarise {title}").model_copy(update={"file_columns": ["file"]})
    job = job_at(tmp_path, spec)
    first = pl.DataFrame({"title": [f"t{i}" for i in range(5)], "file": [str(p) for p in paths]})
    before = rendered(job, first)
    assert cut(job, first, tmp_path / "in.parquet", 1, group=2).equals(before)
    poison(job, 1)

    paths[0].write_bytes(paths[0].read_bytes())  # same bytes, a new modification time
    paths[1].write_bytes(pdf_bytes(["sheet 1, revised"]))
    moved = tmp_path / "elsewhere" / "sheet2.pdf"
    moved.parent.mkdir()
    paths[2].rename(moved)
    second = first.with_columns(
        pl.Series("file", [str(paths[0]), str(paths[1]), str(moved), *map(str, paths[3:])])
    )
    keys = cut(job, second, tmp_path / "in.parquet", 2, group=2)
    assert keys.filter(pl.col(KEY) == POISON)[ROW_ID].to_list() == [0, 2, 3, 4]
    again = rendered(job, second)  # the carried rows' requests are indeed those of before
    assert again.filter(pl.col(ROW_ID) != 1).equals(before.filter(pl.col(ROW_ID) != 1))
    assert keys.filter(pl.col(ROW_ID) == 1).equals(again.filter(pl.col(ROW_ID) == 1))
