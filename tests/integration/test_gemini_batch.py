"""The Gemini Batch provider against the emulator over real HTTP: ``maple enrich --provider
gemini`` (inline and file input), faults mapped to failure classes, orphans, and the Dagster
sensor path."""

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import orjson
import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_assets.factory import enrichment
from maple_assets.wiring import maple_resources
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import TokenUsage, cost_usd
from maple_engine.providers.base import RequestSpec, ShardPayload
from maple_engine.providers.gemini.batch import GeminiBatchProvider
from tests.conftest import env_provider
from tests.integration.test_graph import run_graph

ROWS = 40
MODEL = "gemini-2.5-flash"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as running:
        monkeypatch.setenv("GEMINI_BASE_URL", running.url)
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        yield running


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.parquet"
    pl.DataFrame(
        {
            "sku": [f"S-{i}" for i in range(ROWS)],
            "title": [f"Maple Farm item {i} «{i % 7}»" for i in range(ROWS)],
        }
    ).write_parquet(path)
    return path


def enrich(
    source: Path,
    out: Path,
    store: Path,
    provider: str,
    model: str,
    *extra: str,
    failed: bool = False,
) -> str:
    args = ["enrich", str(source), "--prompt", "Brand of {title}", "--model", model]
    args += ["--provider", provider, "--storage", str(store), "--output", str(out)]
    args += ["--poll-interval", "0.1", *extra]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == (3 if failed else 0), result.output  # 3: some rows failed
    return result.output


def test_enrich_writes_the_same_output_table(
    server: EmulatorServer, catalog: Path, tmp_path: Path
) -> None:
    enrich(catalog, tmp_path / "g.parquet", tmp_path / "sg", "gemini", MODEL, "--quiet")
    ours = pl.read_parquet(tmp_path / "g.parquet")
    titles = pl.read_parquet(catalog)["title"]
    assert ours.columns[:2] == ["sku", "title"] and ours.columns[2] == "llm_response"
    assert ours["llm_response"].to_list() == [f"echo: Brand of {t}" for t in titles]
    assert ours["llm_status"].unique().to_list() == ["succeeded"]
    assert ours["llm_model"].unique().to_list() == [MODEL]
    assert ours["llm_batch_id"].str.starts_with("batches/").all()
    assert (ours["llm_cost_usd"] > 0).all()
    assert server.stats()["bodies_billed_twice"] == 0


def test_structured_output_is_parsed(server: EmulatorServer, catalog: Path, tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"brand": {"type": "string"}}, "required": ["brand"]}
    (tmp_path / "schema.json").write_bytes(orjson.dumps(schema))
    extra = ("--response-schema", str(tmp_path / "schema.json"), "--quiet")
    enrich(catalog, tmp_path / "j.parquet", tmp_path / "sj", "gemini", MODEL, *extra)
    out = pl.read_parquet(tmp_path / "j.parquet")
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    brands = out["llm_parsed"].struct.field("brand").to_list()
    assert brands[3] == "echo: Brand of Maple Farm item 3 «3»"


@pytest.mark.slow  # ~15 s; Anthropic's fault mapping stays in the default suite
def test_faults_and_expiry_map_to_failure_classes(
    catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = {"server_error": 0.15, "refused": 0.2, "rate_limited": 0.15, "expired": 0.3}
    config = EmulatorConfig(batch_seconds=0.1, fail=faults, seed=3, control_fail=0.05)
    with EmulatorServer(config) as running:
        monkeypatch.setenv("GEMINI_BASE_URL", running.url)
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        args = ("--max-requests-per-batch", "10", "--quiet")
        enrich(catalog, tmp_path / "f.parquet", tmp_path / "s", "gemini", MODEL, *args, failed=True)
        stats = running.stats()
    out = pl.read_parquet(tmp_path / "f.parquet")
    assert out.height == ROWS and out["sku"].to_list() == [f"S-{i}" for i in range(ROWS)]
    failed = out.filter(pl.col("llm_status") == "failed")
    refused = failed.filter(pl.col("llm_failure_class") == "refused")
    assert set(failed["llm_failure_class"].to_list()) <= {"refused", "server_error"}
    assert refused.height > 0 and (refused["llm_attempts"] >= 2).all()  # 1 refusal retry
    succeeded = out.filter(pl.col("llm_status") == "succeeded")
    assert succeeded["llm_response"].str.starts_with("echo: ").all()
    assert stats["fault_rate_limited"] > 0 and stats["fault_server_error"] > 0
    assert stats["gemini_batches_ended"] > 4  # expired batches were sent again
    assert stats["bodies_billed_twice"] <= refused.height  # only refusals are paid again


def payload(provider: GeminiBatchProvider, rows: int, shard: str = "s00000") -> ShardPayload:
    spec = RequestSpec(MODEL, system="Be brief.", params={"max_tokens": 64})
    frame = pl.DataFrame({"t": [f"text {i}" for i in range(rows)]})
    requests = frame.select(
        pl.format("r{}", pl.int_range(rows)).alias("custom_id"),
        provider.body_expr(spec, pl.col("t"), None).alias("request"),
    )
    return ShardPayload("job", shard, 1, spec.model, requests)


def wait(provider: GeminiBatchProvider, subs: list[Any]) -> dict[str, Any]:
    states = provider.poll(subs)
    while not all(s.ended for s in states.values()):
        states = provider.poll(subs)
    return states


def test_file_input_upload_results_and_orphans(server: EmulatorServer) -> None:
    provider = env_provider("gemini", inline_max_bytes=0)  # every shard through the Files API
    subs = [provider.submit(payload(provider, 3 + i, f"s{i:05d}")) for i in range(5)]
    assert all(s.file_id and s.file_id.startswith("files/") for s in subs)
    states = wait(provider, subs)
    rows = provider.results(subs[1], states[subs[1].batch_id])
    assert rows["custom_id"].sort().to_list() == ["r0", "r1", "r2", "r3"]
    assert rows["response"].to_list()[0] == "echo: text 0"
    assert (rows["input_tokens"] > 0).all() and (rows["output_tokens"] > 0).all()
    assert states[subs[1].batch_id].completed == 4
    found = {s.shard: s for s in provider.find_orphans("job")}
    assert {k: v.batch_id for k, v in found.items()} == {s.shard: s.batch_id for s in subs}
    assert found["s00002"].content_hash == subs[2].content_hash and found["s00002"].adopted
    assert provider.find_orphans("other-job") == []
    assert server.stats()["files_uploaded"] == 5


def test_inline_input_is_used_for_small_shards(server: EmulatorServer) -> None:
    provider = env_provider("gemini")
    sub = provider.submit(payload(provider, 3))
    assert sub.file_id is None
    states = wait(provider, [sub])
    rows = provider.results(sub, states[sub.batch_id])
    assert rows["status"].to_list() == ["succeeded"] * 3
    assert server.stats()["files_uploaded"] == 0


def test_cancelled_batch_reports_ended() -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=5)) as slow:
        provider = GeminiBatchProvider(base_url=slow.url, api_key="k")
        sub = provider.submit(payload(provider, 4))
        provider.cancel(sub)
        state = wait(provider, [sub])[sub.batch_id]
        assert state.status == "cancelled" and state.ended


def shards_of(span: str) -> list[str]:
    """The shards of a collect run's key part: ``s00001``, or the range ``s00000..s00002``."""
    first, _, last = span.partition("..")
    if not last:
        return [first]
    return [f"s{i:05d}" for i in range(int(first[1:]), int(last[1:]) + 1)]


@pytest.mark.slow  # ~15 s; the default suite runs every name to its end (tests/conformance)
def test_dagster_sensor_finishes_the_job(server: EmulatorServer, tmp_path: Path) -> None:
    frame = pl.DataFrame({"n": [str(i) for i in range(12)], "title": [f"t{i}" for i in range(12)]})

    @dg.asset
    def items() -> pl.DataFrame:
        return frame

    en = enrichment(
        name="gemini_items",
        source=items,
        prompt="{n}: {title}",
        model=MODEL,
        provider="gemini",
        max_requests_per_batch=5,
    )
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    with dg.instance_for_test() as instance:
        launched = run_graph(en, [items], resources, instance)
    # each of the 3 shards collected once: by its own run, or in a range with those whose
    # batches ended by the same tick
    spans = [k.split(":")[1] for k in launched if ":collect" in k]
    assert sorted(s for span in spans for s in shards_of(span)) == ["s00000", "s00001", "s00002"]
    output = pl.read_parquet(tmp_path / "store" / "gemini_items" / "output" / "merged.parquet")
    assert output["llm_response"].to_list() == [f"echo: {i}: t{i}" for i in range(12)]
    assert output["llm_batch_id"].n_unique() == 3
    assert server.stats()["bodies_billed_twice"] == 0


@pytest.mark.slow  # ~25 s
def test_gemini_realtime_enrich_with_faults(
    catalog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = EmulatorConfig(fail={"rate_limited": 0.2, "server_error": 0.1}, seed=4, rpm=6000)
    with EmulatorServer(config) as running:
        monkeypatch.setenv("GEMINI_BASE_URL", running.url)
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        out = tmp_path / "rt.parquet"
        enrich(catalog, out, tmp_path / "s", "gemini-realtime", MODEL, "--quiet")
        stats = running.stats()
    frame = pl.read_parquet(out)
    titles = pl.read_parquet(catalog)["title"]
    assert frame["llm_status"].to_list() == ["succeeded"] * ROWS
    assert frame["llm_response"].to_list() == [f"echo: Brand of {t}" for t in titles]
    assert frame["llm_batch_id"].str.starts_with("rt-").all()
    assert stats["realtime_429"] > 0 and stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == ROWS
    price = PriceBook().price(MODEL, "gemini-realtime")
    first = frame.row(0, named=True)
    usage = TokenUsage(first["llm_input_tokens"], output_tokens=first["llm_output_tokens"])
    assert first["llm_cost_usd"] == pytest.approx(cost_usd(price, usage, batch=False))


def test_the_jobs_priority_reaches_the_batch_and_orders_the_waiting_ones() -> None:
    """With one Gemini batch running at a time, the batches that wait start highest
    ``batch.priority`` first: the job's ``--priority`` travels in the batch create."""
    config = EmulatorConfig(batch_seconds=0.4, gemini_batch_slots=1)
    with EmulatorServer(config) as slots:
        provider = GeminiBatchProvider(base_url=slots.url, api_key="k")
        subs = []
        for shard, priority in (("s0", 0), ("s1", -2), ("s2", 7), ("s3", 3)):
            sent = dataclasses.replace(payload(provider, 3, shard), priority=priority)
            subs.append(provider.submit(sent))
        states = wait(provider, subs)
        assert all(states[s.batch_id].status == "completed" for s in subs)
        batches = httpx.get(f"{slots.url}/v1beta/batches", headers={"x-goog-api-key": "k"})
    meta = {op["name"]: op["metadata"] for op in batches.json()["operations"]}
    ended = [meta[s.batch_id]["endTime"] for s in subs]
    assert [meta[s.batch_id].get("priority") for s in subs] == [None, "-2", "7", "3"]
    # s0 ran first (it found the slot free); then 7, 3, -2 (not the order they were sent in)
    assert ended[0] < ended[2] < ended[3] < ended[1]


def test_a_batch_priority_that_is_no_int64_is_refused() -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as running:
        body = {"batch": {"displayName": "x", "priority": "high", "inputConfig": {}}}
        answer = httpx.post(
            f"{running.url}/v1beta/models/{MODEL}:batchGenerateContent",
            json=body,
            headers={"x-goog-api-key": "k"},
        )
    assert answer.status_code == 400 and "batch.priority" in answer.text


def test_enrich_sends_the_jobs_priority_with_every_batch(
    server: EmulatorServer, catalog: Path, tmp_path: Path
) -> None:
    enrich(
        catalog, tmp_path / "g.parquet", tmp_path / "sg", "gemini", MODEL, "--quiet",
        "--priority", "5", "--max-requests-per-batch", "20",
    )  # fmt: skip
    listed = httpx.get(f"{server.url}/v1beta/batches", headers={"x-goog-api-key": "test-key"})
    priorities = [op["metadata"].get("priority") for op in listed.json()["operations"]]
    assert priorities == ["5", "5"]
