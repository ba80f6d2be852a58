"""Every failure class injected by the emulator at high rates, through ``maple enrich``.

Each test runs the whole job in-process (click's runner, the real asset graph, the emulator over
HTTP) and checks every row's final status, failure class, attempts and cost, plus the emulator's
billing counters.
"""

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from click.testing import CliRunner, Result

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.collect.responses import IMAGE_GONE
from maple_engine.collect.shard_responses import shard_responses
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import cost_expr
from maple_engine.model import ROW_ID
from maple_engine.state import JobState
from maple_engine.storage.response_store import ResponseStore, collection
from maple_engine.storage.storage import Storage

ROWS = 12


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "items.parquet"
    pl.DataFrame(
        {
            "sku": [f"S{i:03d}" for i in range(ROWS)],
            "title": [f"product number {i}" for i in range(ROWS)],
        }
    ).write_parquet(path)
    return path


def run(
    server: EmulatorServer, table: Path, tmp_path: Path, *extra: str, job: str = "faults"
) -> tuple[Result, pl.DataFrame]:
    out = tmp_path / "out.parquet"
    args = [
        "enrich", str(table), "--prompt", "Name {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--storage", str(tmp_path / "store"), "--job", job,
        "--output", str(out), "--poll-interval", "0.05", "--max-requests-per-batch", "12",
        "--quiet", *extra,
    ]  # fmt: skip
    result = CliRunner().invoke(main, args, env={"MAPLE_EMULATOR_URL": server.url})
    assert result.exit_code in (0, 3, 4), (result.output, result.exception)
    frame = pl.read_parquet(out)
    failed = frame.filter(pl.col("llm_status") == "failed").height
    stopped = any(line.startswith("stopped:") for line in result.stderr.splitlines())
    assert result.exit_code == (4 if stopped else 3 if failed else 0), result.output
    return result, frame


def emulator(**config: Any) -> EmulatorServer:
    config.setdefault("batch_seconds", 0.05)
    config.setdefault("control_fail", 0.0)
    return EmulatorServer(EmulatorConfig(seed=7, **config))


def unit_cost(frame: pl.DataFrame) -> float:
    """What one successful send of a row costs (all prompts here have similar token counts)."""
    ok = frame.filter(pl.col("llm_attempts") == 1, pl.col("llm_status") == "succeeded")
    return float(ok["llm_cost_usd"].max())  # type: ignore[arg-type]


def assert_all_succeeded_once_billed(frame: pl.DataFrame, stats: dict[str, Any]) -> None:
    assert frame["llm_status"].to_list() == ["succeeded"] * ROWS
    assert frame["llm_failure_class"].null_count() == ROWS
    assert frame["sku"].to_list() == [f"S{i:03d}" for i in range(ROWS)]
    assert frame["llm_response"].to_list() == [
        f"echo: Name product number {i}" for i in range(ROWS)
    ]
    # unbilled failures add no cost: every row costs what its one successful send cost
    assert (frame["llm_cost_usd"] > 0).all()
    price = PriceBook().price("gpt-4o-mini", "emulator")
    tokens = frame.select(
        input_tokens="llm_input_tokens",
        output_tokens="llm_output_tokens",
        cached_input_tokens=pl.lit(0),
        cache_write_tokens=pl.lit(0),
    )
    expected = tokens.select(cost_expr(price, batch=True)).to_series().to_list()
    assert frame["llm_cost_usd"].to_list() == pytest.approx(expected)
    assert stats["requests_billed"] == ROWS
    assert stats["bodies_billed_twice"] == 0


def test_rate_limited_rows_are_retried_until_they_succeed(table: Path, tmp_path: Path) -> None:
    with emulator(fail={"rate_limited": 0.5}) as server:
        _, frame = run(server, table, tmp_path)
        stats = server.stats()
    assert_all_succeeded_once_billed(frame, stats)
    assert frame["llm_attempts"].max() > 1  # type: ignore[operator]
    assert stats["fault_rate_limited"] == int(frame["llm_attempts"].sum()) - ROWS
    assert_each_answer_once(tmp_path / "store", frame)


def assert_each_answer_once(root: Path, frame: pl.DataFrame) -> None:
    """Each answer is kept once: a final one in the response store (with its row), a pending
    one in the last collection's ``results-n``; no other copy (no IO-manager file per shard)."""
    state = JobState(Storage(str(root)), "faults")
    summary = state.summary("s00000")
    assert summary is not None and summary.attempt > 1
    names = [collection("s00000", n) for n in range(1, summary.attempt + 1)]
    stored = ResponseStore(state.storage, "faults").collected(names)
    assert sorted(stored[ROW_ID].to_list()) == list(range(ROWS))  # every row once, final
    for n in range(1, summary.attempt + 1):
        pending = state.results("s00000", n)  # rows not final after attempt n: all resent
        assert (pending["status"] == "failed").all()
        planned = state.plan("s00000", n + 1)
        assert pending.is_empty() or set(pending[ROW_ID]) <= set(planned[ROW_ID])  # type: ignore[index]
    assert state.results("s00000", summary.attempt).is_empty()
    files = {p.name for p in (root / "faults").rglob("*.parquet")}
    assert "responses.parquet" not in files
    assert not (root / "faults" / "raw_responses").exists()
    assert not (root / "faults" / "submissions").exists()
    responses = shard_responses(state, "s00000").sort(ROW_ID)  # read in no row order
    assert responses["attempts"].to_list() == frame["llm_attempts"].to_list()
    assert responses["cost_usd"].to_list() == pytest.approx(frame["llm_cost_usd"].to_list())


def test_expired_batches_resend_only_the_unrun_rows(table: Path, tmp_path: Path) -> None:
    with emulator(fail={"expired": 0.5}) as server:
        _, frame = run(server, table, tmp_path)
        stats = server.stats()
    assert_all_succeeded_once_billed(frame, stats)
    assert stats["batches_expired"] >= 1
    resent = frame.filter(pl.col("llm_attempts") > 1)
    assert 0 < resent.height < ROWS  # an expired batch ran half its rows: those were kept
    batches = set(frame["llm_batch_id"].to_list())
    assert len(batches) > 1  # the resent rows succeeded in retry batches


def test_server_errors_obey_a_cli_retry_override(table: Path, tmp_path: Path) -> None:
    with emulator(fail={"server_error": 0.7}) as server:
        _, frame = run(server, table, tmp_path, "--retry", "server_error=1")
        stats = server.stats()
    failed = frame.filter(pl.col("llm_status") == "failed")
    ok = frame.filter(pl.col("llm_status") == "succeeded")
    assert failed.height > 0 and ok.height > 0
    assert set(failed["llm_failure_class"]) == {"server_error"}
    assert set(failed["llm_attempts"]) == {2}  # one retry, as overridden
    assert (failed["llm_cost_usd"] == 0).all() and failed[
        "llm_response"
    ].null_count() == failed.height
    assert failed["llm_error"].str.contains("server had an error").all()
    assert set(ok["llm_attempts"]).issubset({1, 2})
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == ok.height


def test_refused_rows_fail_after_one_resend_and_pay_for_each(table: Path, tmp_path: Path) -> None:
    with emulator(fail={"refused": 0.4}) as server:
        _, frame = run(server, table, tmp_path)
        stats = server.stats()
    refused = frame.filter(pl.col("llm_status") == "failed")
    ok = frame.filter(pl.col("llm_status") == "succeeded")
    assert refused.height > 0 and ok.height > 0
    assert set(refused["llm_failure_class"]) == {"refused"}
    assert set(refused["llm_attempts"]) == {2}  # sticky: 1 send + 1 resend (random sampling)
    assert set(ok["llm_attempts"]) == {1}
    # a refusal is billed: each refused row paid twice, and only refused rows twice
    assert (refused["llm_cost_usd"] > ok["llm_cost_usd"].min()).all()  # type: ignore[operator]
    assert stats["bodies_billed_twice"] == refused.height
    assert stats["requests_billed"] == ok.height + 2 * refused.height


def test_at_temperature_zero_a_refusal_is_paid_once(table: Path, tmp_path: Path) -> None:
    """The same request at temperature 0 gets the same refusal: resending it only pays again."""
    with emulator(fail={"refused": 0.4}) as server:
        _, frame = run(server, table, tmp_path, "--param", "temperature=0")
        stats = server.stats()
    refused = frame.filter(pl.col("llm_status") == "failed")
    assert refused.height > 0 and set(refused["llm_attempts"]) == {1}
    assert stats["bodies_billed_twice"] == 0 and stats["requests_billed"] == frame.height


def test_invalid_output_is_retried_and_parsed_fields_land_in_llm_parsed(
    table: Path, tmp_path: Path
) -> None:
    schema = {
        "type": "object",
        "properties": {"brand": {"type": "string"}, "size_ml": {"type": "integer"}},
        "required": ["brand", "size_ml"],
        "additionalProperties": False,
    }
    schema_file = tmp_path / "schema.json"
    schema_file.write_bytes(orjson.dumps(schema))
    with emulator(fail={"invalid_output": 0.5}) as server:
        _, frame = run(server, table, tmp_path, "--response-schema", str(schema_file))
        stats = server.stats()
    assert frame.schema["llm_parsed"] == pl.Struct({"brand": pl.String, "size_ml": pl.Int64})
    ok = frame.filter(pl.col("llm_status") == "succeeded")
    failed = frame.filter(pl.col("llm_status") == "failed")
    assert ok.height > 0
    assert stats["requests_billed"] == int(frame["llm_attempts"].sum())  # invalid output is paid
    assert ok["llm_parsed"].struct.field("brand").null_count() == 0
    assert ok["llm_parsed"].struct.field("size_ml").null_count() == 0
    assert failed["llm_parsed"].null_count() == failed.height
    assert set(failed["llm_failure_class"]) <= {"invalid_output"}
    assert set(failed["llm_attempts"]) <= {3}
    assert frame.filter(pl.col("llm_attempts") > 1).height > failed.height  # some retries won


class _Images(http.server.BaseHTTPRequestHandler):
    """Serves ``/ok-*.png``; everything else is 404. HEAD is refused for ``/gethead-*``."""

    def do_HEAD(self) -> None:
        if self.path.startswith("/gethead-"):
            self.send_response(405)
        else:
            self.send_response(200 if self.path.startswith("/ok-") else 404)
        self.end_headers()

    def do_GET(self) -> None:
        found = self.path.startswith(("/ok-", "/gethead-"))
        self.send_response(200 if found else 404)
        self.end_headers()
        if found:
            self.wfile.write(b"\x89PNG")

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def image_host() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_invalid_image_retry_checks_the_url_first(tmp_path: Path, image_host: str) -> None:
    kinds = ["ok", "gone", "gethead"] * 4
    path = tmp_path / "images.csv"
    pl.DataFrame(
        {
            "title": [f"item {i}" for i in range(12)],
            "img": [f"{image_host}/{k}-{i}.png" for i, k in enumerate(kinds)],
        }
    ).write_csv(path)
    with emulator(fail={"invalid_image": 1.0}) as server:
        _, frame = run(server, path, tmp_path, "--image-column", "img")
        stats = server.stats()
    # the image was sent as an image part: the emulator only injects invalid_image on those
    assert stats["fault_invalid_image"] == int(frame["llm_attempts"].sum())
    assert set(frame["llm_failure_class"]) == {"invalid_image"}
    state = JobState(Storage(str(tmp_path / "store")), "faults")
    request = state.shard_frame("s00000")["_maple_request"][0]
    assert '"type":"image_url"' in request and f"{image_host}/ok-0.png" in request
    gone = frame.filter(pl.col("img").str.contains("/gone-"))
    there = frame.filter(~pl.col("img").str.contains("/gone-"))
    assert set(gone["llm_attempts"]) == {1}  # checked before the retry, never resent
    assert gone["llm_error"].str.starts_with(IMAGE_GONE).all()
    assert gone["llm_error"].str.contains("HTTP 404").all()
    assert set(there["llm_attempts"]) == {2}  # HEAD ok (or GET after a refused HEAD): retried


def test_no_image_check_resends_without_checking(tmp_path: Path) -> None:
    path = tmp_path / "images.csv"
    pl.DataFrame(
        {"title": ["a", "b"], "img": ["http://127.0.0.1:9/x.png", "ftp://nowhere/y.png"]}
    ).write_csv(path)
    with emulator(fail={"invalid_image": 1.0}) as server:
        _, frame = run(server, path, tmp_path, "--image-column", "img", "--no-image-check")
    assert set(frame["llm_attempts"]) == {2}
    assert not frame["llm_error"].str.starts_with(IMAGE_GONE).any()


def test_a_batch_rejected_as_too_large_is_split(table: Path, tmp_path: Path) -> None:
    with emulator(openai_max_requests=5) as server:
        _, frame = run(server, table, tmp_path)
        stats = server.stats()
    assert_all_succeeded_once_billed(frame, stats)
    assert stats["batches_failed"] >= 2  # 12 -> 6 -> 3 requests per batch
    # rows 0-5 of a shard: rejected in the 12- and the 6-row batch, then ran (3 sends);
    # rows 6-11: rejected in the 12-row batch only, then ran in 3-row batches (2 sends)
    assert frame["llm_attempts"].to_list() == [3] * 6 + [2] * 6
    summary = JobState(Storage(str(tmp_path / "store")), "faults").summary("s00000")
    assert summary is not None and summary.max_requests == 3


def test_insufficient_quota_stops_and_a_rerun_resumes(table: Path, tmp_path: Path) -> None:
    with emulator(fail={"insufficient_quota": 1.0}) as server:
        result, frame = run(server, table, tmp_path)
    assert "insufficient quota" in result.output
    assert set(frame["llm_failure_class"]) == {"insufficient_quota"}
    assert set(frame["llm_attempts"]) == {1} and (frame["llm_cost_usd"] == 0).all()
    with emulator() as topped_up:
        result, frame = run(topped_up, table, tmp_path)
        stats = topped_up.stats()
    assert "resuming job faults" in result.output
    assert_all_succeeded_once_billed(frame, stats)
    assert set(frame["llm_attempts"]) == {2}
