"""Living enrichments on the command line: one job name, reruns send only new and changed rows.

Each test runs ``maple enrich`` as a subprocess against a live emulator and proves what was sent
with the emulator's own counters.
"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

PROMPT = "Brand of {title}: {description}"


def catalog(n: int, start: int = 0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "sku": [f"SKU-{i}" for i in range(start, start + n)],
            "title": [f"Item {i}" for i in range(start, start + n)],
            "description": [f"about item {i}" for i in range(start, start + n)],
        }
    )


def edit_titles(rows: pl.DataFrame, skus: list[str]) -> pl.DataFrame:
    """``rows`` with the title of the given SKUs changed."""
    edited = pl.col("sku").is_in(skus)
    return rows.with_columns(
        pl.when(edited).then(pl.col("title") + " (new)").otherwise(pl.col("title")).alias("title")
    )


def run(
    server: EmulatorServer,
    source: Path,
    storage: Path,
    *extra: str,
    prompt: str = PROMPT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    args = [
        *("enrich", str(source), "--prompt", prompt, "--model", "gpt-4o-mini"),
        *("--provider", "emulator", "--job", "catalog", "--storage", str(storage)),
        *("--poll-interval", "0.1", "--max-requests-per-batch", "7", "--quiet", *extra),
    ]
    full_env = {**os.environ, "MAPLE_EMULATOR_URL": server.url, **(env or {})}
    full_env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        check=False,
    )


def sent_by(server: EmulatorServer, *args: object, failed: bool = False, **kwargs: object) -> int:
    """Run ``maple enrich`` and return how many requests reached the emulator."""
    before = server.stats()["requests_received"]
    result = run(server, *args, **kwargs)  # type: ignore[arg-type]
    assert result.returncode == (3 if failed else 0), result.stderr
    return int(server.stats()["requests_received"] - before)


def output(source: Path) -> pl.DataFrame:
    return pl.read_parquet(source.with_name(source.stem + "_enriched.parquet"))


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as live:
        yield live


@pytest.mark.slow
def test_edit_append_delete_sends_only_new_and_changed_rows(
    server: EmulatorServer, tmp_path: Path
) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    first = catalog(30)
    first.write_parquet(source)
    assert sent_by(server, source, storage) == 30

    edited = edit_titles(first, ["SKU-3", "SKU-17"])
    changed = pl.concat([edited.filter(pl.col("sku") != "SKU-9"), catalog(4, start=100)])
    changed.write_parquet(source)
    assert sent_by(server, source, storage) == 2 + 4  # edited + appended; the deleted row: none

    out = output(source)
    assert out.select(changed.columns).equals(changed)  # every row once, in input order
    assert out["llm_response"].to_list() == [
        f"echo: Brand of {t}: {d}" for t, d in changed.select("title", "description").iter_rows()
    ]
    fresh = out.filter(~pl.col("llm_reused"))["sku"].to_list()
    assert sorted(fresh) == sorted(["SKU-3", "SKU-17", "SKU-100", "SKU-101", "SKU-102", "SKU-103"])
    assert (out["llm_cost_usd"] > 0).all()  # a reused answer keeps what it cost when paid
    assert server.stats()["bodies_billed_twice"] == 0

    assert sent_by(server, source, storage) == 0  # the same input again: nothing to send


@pytest.mark.slow  # ~13-19 s: three runs
def test_rerun_shards_hold_only_changed_rows_and_match_a_fresh_run(
    server: EmulatorServer, tmp_path: Path
) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    first = catalog(40)
    first.write_parquet(source)
    assert sent_by(server, source, storage) == 40  # 6 shards of at most 7 rows
    edits = ["SKU-3", "SKU-17", "SKU-33"]  # in three of the first run's shards
    changed = pl.concat([edit_titles(first, edits), catalog(5, start=100)])
    changed.write_parquet(source)
    assert sent_by(server, source, storage) == 3 + 5

    state = storage / "catalog" / "state"
    record = orjson.loads((state / "manifest.json").read_bytes())
    assert record["layout"] == "sparse"
    assert [s["rows"] for s in record["shards"]] == [7, 1]  # only the rows sent, cut anew
    cut = pl.concat(
        pl.read_parquet(state / "shards" / f"{s['key']}.parquet") for s in record["shards"]
    )
    assert cut["sku"].to_list() == [*edits, *(f"SKU-{i}" for i in range(100, 105))]
    assert cut["_maple_row_id"].to_list() == [3, 17, 33, *range(40, 45)]

    status = subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", "status", "catalog", "--format", "json"],
        cwd=tmp_path,
        env={**os.environ, "MAPLE_STORAGE": str(storage)},
        capture_output=True,
        text=True,
        check=True,
    )
    job = orjson.loads(status.stdout)
    assert (job["rows"], job["reused"], job["succeeded"]) == (45, 37, 8)

    out = output(source)
    assert out.select(changed.columns).equals(changed)  # every row once, in input order
    assert sorted(out.filter(~pl.col("llm_reused"))["sku"]) == sorted(cut["sku"])
    assert server.stats()["bodies_billed_twice"] == 0

    # the same input from scratch, as another job: the same rows and answers

    fresh_source = tmp_path / "fresh" / "items.parquet"
    fresh_source.parent.mkdir()
    changed.write_parquet(fresh_source)
    fresh_storage = tmp_path / "fresh" / "store"
    assert sent_by(server, fresh_source, fresh_storage, "--job", "fresh") == 45
    fresh = output(fresh_source)
    answers = pl.exclude("llm_reused", "llm_batch_id")
    assert_frame_equal(out.select(answers), fresh.select(answers))
    assert out.schema == fresh.schema

    # rows deleted, nothing to send: a version whose shards hold every row, all reused
    fewer = changed.filter(pl.col("sku") != "SKU-20")
    fewer.write_parquet(source)
    assert sent_by(server, source, storage) == 0
    assert orjson.loads((state / "manifest.json").read_bytes()).get("layout") is None
    rest = output(source)
    assert rest.select(fewer.columns).equals(fewer)
    assert rest["llm_reused"].all()


@pytest.mark.slow  # ~30 s
def test_prompt_change_sends_all_and_revert_sends_none(
    server: EmulatorServer, tmp_path: Path
) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    catalog(12).write_parquet(source)
    assert sent_by(server, source, storage) == 12
    other = "Size of {title}"
    assert sent_by(server, source, storage, prompt=other) == 12
    assert output(source)["llm_response"][0] == "echo: Size of Item 0"
    result = run(server, source, storage)
    assert result.returncode == 0, result.stderr
    assert "sent           0" in result.stdout
    assert "reused         12" in result.stdout
    out = output(source)
    assert out["llm_response"][0] == "echo: Brand of Item 0: about item 0"
    assert out["llm_reused"].all()
    assert server.stats()["bodies_billed_twice"] == 0


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_no_reuse_sends_every_row(server: EmulatorServer, tmp_path: Path) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    catalog(8).write_parquet(source)
    assert sent_by(server, source, storage) == 8
    assert sent_by(server, source, storage, "--no-reuse") == 8
    assert not output(source)["llm_reused"].any()


def test_identical_requests_are_sent_once(server: EmulatorServer, tmp_path: Path) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    rows = catalog(5)
    pl.concat([rows, rows.head(3)]).write_parquet(source)  # SKUs repeat: same requests
    assert sent_by(server, source, storage) == 5
    out = output(source)
    assert out.height == 8
    assert out["llm_status"].to_list() == ["succeeded"] * 8
    assert out["llm_response"][5] == out["llm_response"][0]
    assert out["llm_reused"].to_list() == [False] * 5 + [True] * 3


@pytest.mark.slow  # ~30 s
def test_retry_failed_resends_only_failed_rows_with_a_fresh_budget(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, fail={"server_error": 0.4}, control_fail=0.0)
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    catalog(40).write_parquet(source)
    with EmulatorServer(config) as server:
        assert sent_by(server, source, storage, "--retry", "server_error=0", failed=True) == 40
        failed = output(source).filter(pl.col("llm_status") == "failed")
        assert failed.height > 0
        assert set(failed["llm_failure_class"]) == {"server_error"}

        # A plain rerun keeps the failures: nothing is sent.
        assert sent_by(server, source, storage, "--retry", "server_error=0", failed=True) == 0
        assert output(source).filter(pl.col("llm_status") == "failed").height == failed.height

        # --retry-failed sends exactly the failed rows again.
        retry = ("--retry", "server_error=0", "--retry-failed")
        sent = sent_by(server, source, storage, *retry, failed=True)
        assert sent == failed.height
        after = output(source)
        resent = after.filter(pl.col("sku").is_in(failed["sku"].implode()))
        assert not resent["llm_reused"].any()
        assert resent["llm_attempts"].to_list() == [1] * failed.height  # a fresh budget
        assert after.filter(~pl.col("sku").is_in(failed["sku"].implode()))["llm_reused"].all()
        assert after.filter(pl.col("llm_status") == "failed").height < failed.height


@pytest.mark.slow  # ~30 s: a kill harness, in the slow pass
def test_kill_during_incremental_rerun_then_resume_pays_nothing_twice(
    server: EmulatorServer, tmp_path: Path
) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    first = catalog(20)
    first.write_parquet(source)
    assert sent_by(server, source, storage) == 20
    pl.concat([first, catalog(10, start=50)]).write_parquet(source)
    before = server.stats()["requests_received"]
    killed = run(server, source, storage, env={"MAPLE_CRASH_AT": "after_create"})
    assert killed.returncode == -9
    sent_by(server, source, storage)  # the killed run's batch is adopted, not created again
    assert server.stats()["requests_received"] - before == 10
    out = output(source)
    assert out.height == 30
    assert out["llm_status"].to_list() == ["succeeded"] * 30
    assert out["llm_reused"].sum() == 20
    stats = server.stats()
    assert stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == 30


@pytest.mark.slow  # ~30 s
def test_dry_run_of_a_rerun_prices_only_what_it_would_send(
    server: EmulatorServer, tmp_path: Path
) -> None:
    source, storage = tmp_path / "items.parquet", tmp_path / "store"
    catalog(30).write_parquet(source)
    assert sent_by(server, source, storage) == 30
    first = run(server, source, storage, "--dry-run")  # nothing changed: nothing to send
    assert first.returncode == 0, first.stderr
    assert "0 to send of 30 rows (30 answered by the response store" in first.stdout
    assert "batch USD      ~0.000000" in first.stdout

    edited = catalog(30).with_columns(
        pl.when(pl.col("sku").is_in(["SKU-3", "SKU-4"]))
        .then(pl.lit("a new description"))
        .otherwise(pl.col("description"))
        .alias("description")
    )
    pl.concat([edited, catalog(2, start=100), catalog(1, start=100)]).write_parquet(source)
    before = server.stats()["requests_received"]
    dry = run(server, source, storage, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert server.stats()["requests_received"] == before  # a dry run sends nothing
    # 2 edited + 2 new (one of them twice): 4 requests; 28 stored answers; 1 repeat.
    assert "4 to send of 33 rows (28 answered by the response store" in dry.stdout, dry.stdout
    assert "1 repeat an identical request" in dry.stdout
    assert not list(storage.glob("catalog/state/versions/2"))  # nothing written for it
    assert sent_by(server, source, storage) == 4  # what the dry run said
