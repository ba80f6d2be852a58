"""Hostile case: retries that would pay again and again. A gateway that answers 500 after the
upstream answered and billed, and a provider whose every answer is a 500: a row is sent at most
1 + its failure class's retries times in all, the same answer twice in a row for the same request
is not retried again, and when requests keep failing the same way the job stops (exit 4) in one
line naming the error, the URL and the count, with a "retrying" line on stderr meanwhile. A
500 the gateway marks as its own exception (Portkey's ``x-portkey-gateway-exception``) is not
sent again at all: a real-time request's row fails, a batch create is looked up and the batch it
made is used.

Before these bounds, each request of the gateway case was sent 36 times (6 sends an attempt,
6 attempts)."""

import threading
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.gateway import gateway
from tests.e2e.hostile import maple_at, outcome_line, retrying_lines, table_job

OUTAGE_S = 4.0  # a 503 outage when the job starts


def job(tmp_path: Path, command: str, rows: int, *extra: str) -> list[str]:
    return table_job(tmp_path, command, "openai-realtime", rows, *extra)


@pytest.mark.parametrize(("command", "rows", "texts"), [("enrich", 30, 1), ("embed", 250, 100)])
def test_a_gateway_500_after_billing_stops_after_two_requests_sent_twice(
    tmp_path: Path, command: str, rows: int, texts: int
) -> None:
    with (
        EmulatorServer(EmulatorConfig(batch_seconds=0)) as server,
        gateway(server.url, "500-after-billing") as (_, url),
    ):
        result, took = maple_at(url, *job(tmp_path, command, rows))
        stats = server.stats()
    assert result.returncode == 4, result.stderr
    line = outcome_line(result.stderr)
    assert line.startswith("stopped: openai-realtime: POST " + url), line
    assert "failed 2 different requests the same way" in line
    assert "(500: upstream returned an unreadable answer)" in line
    assert "sk-hostile-test-key" not in result.stderr
    assert len(retrying_lines(result.stderr)) == 1
    # two requests, each sent twice: the same answer twice in a row is not retried again
    assert stats["requests_billed"] == 4 * texts
    assert stats["bodies_billed_twice"] == 2 * texts
    assert took < 30


@pytest.mark.parametrize(
    ("command", "rows", "texts"),
    [("enrich", 30, 1), pytest.param("embed", 250, 100, marks=pytest.mark.slow)],  # ~5.5 s
)
def test_a_gateway_exception_after_billing_is_never_resent_and_names_the_gateway(
    tmp_path: Path, command: str, rows: int, texts: int
) -> None:
    with (
        EmulatorServer(EmulatorConfig(batch_seconds=0)) as server,
        gateway(server.url, "gateway-exception") as (_, url),
    ):
        result, took = maple_at(url, *job(tmp_path, command, rows))
        stats = server.stats()
    assert result.returncode == 4, result.stderr
    line = outcome_line(result.stderr)
    assert (
        "failed 2 different requests the same way (not resent: 500: Something went wrong." in line
    )
    assert "Portkey's gateway marked this 500 as its own exception" in line
    assert "(x-portkey-gateway-exception: true)" in line and "call the provider directly" in line
    assert not retrying_lines(result.stderr)  # nothing was retried
    assert stats["requests_billed"] == 2 * texts  # two requests, each sent once
    assert stats["bodies_billed_twice"] == 0
    assert took < 30


def test_a_batch_create_the_gateway_marks_as_its_exception_is_found_not_repeated(
    tmp_path: Path,
) -> None:
    with (
        EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server,
        gateway(server.url, "gateway-exception", healthy_posts=1) as (front, url),  # the upload
    ):
        result, _ = maple_at(url, *table_job(tmp_path, "enrich", "openai", 10))
        stats = server.stats()
    assert result.returncode == 0, result.stderr
    assert "POST /batches answered 500, but the provider had done it (batch_" in result.stderr
    assert stats["files_uploaded"] == 1 and stats["batches_created"] == 1  # created once
    assert stats["requests_billed"] == 10 and stats["bodies_billed_twice"] == 0
    assert max(front.posted.values()) == 1


def test_the_breaker_stops_a_job_once_most_of_the_last_requests_fail_alike(
    tmp_path: Path,
) -> None:
    healthy = 5
    with (
        EmulatorServer(EmulatorConfig(batch_seconds=0)) as server,
        gateway(server.url, "500-after-billing", healthy_posts=healthy) as (_, url),
    ):
        result, took = maple_at(url, *job(tmp_path, "enrich", 200))
        stats = server.stats()
    assert result.returncode == 4, result.stderr
    line = outcome_line(result.stderr)
    assert "of the last 20 requests to " + url + "/v1/chat/completions failed the same way" in line
    assert "(500: upstream returned an unreadable answer)" in line
    # the window (16 of 20 sends) and what was in flight when it tripped; 200 rows x 6 before
    assert stats["requests_billed"] <= healthy + 20 + 64
    assert stats["bodies_billed_twice"] <= 20
    assert took < 30


@pytest.mark.parametrize(
    ("retries", "sends"),
    [
        (2, 3),  # all in the first attempt (before: 6 sends in each of 3 attempts, 18)
        # 6 in the first attempt (its cap), 4 in the second (before: 60); ~8-16 s
        pytest.param(9, 10, marks=pytest.mark.slow),
    ],
)
def test_a_row_is_sent_at_most_one_plus_its_class_retries_across_attempts(
    tmp_path: Path, retries: int, sends: int
) -> None:
    # every send answered 500, each with its own request id (not the same answer twice)
    config = EmulatorConfig(batch_seconds=0, fail={"server_error": 1.0}, control_fail=0)
    with EmulatorServer(config) as server:
        args = job(tmp_path, "enrich", 1, "--retry", f"server_error={retries}")
        result, _ = maple_at(server.url, *args)
        stats = server.stats()
    assert result.returncode == 3, result.stderr
    assert "server_error 1" in result.stdout
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_attempts"].to_list() == [sends]
    assert stats["realtime_requests"] == sends
    assert retrying_lines(result.stderr)


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_failures_that_differ_only_by_request_id_are_the_same_failure(tmp_path: Path) -> None:
    # a provider answering every send 500, naming each request in its message (OpenAI's way)
    config = EmulatorConfig(batch_seconds=0, fail={"server_error": 1.0}, control_fail=0)
    with EmulatorServer(config) as server:
        result, took = maple_at(server.url, *job(tmp_path, "enrich", 30))
        stats = server.stats()
    assert result.returncode == 4, result.stderr
    line = outcome_line(result.stderr)
    assert "failed 2 different requests the same way (500: The server had an error" in line
    assert "(request ID <id>)" in line
    # two first contacts of 1 + 5 sends each (server_error's retries); before: 30 rows x 36
    assert stats["realtime_requests"] == 12
    assert stats["requests_billed"] == 0
    assert took < 60


@pytest.mark.slow  # ~9 s; the other retry stories stay in the default suite
def test_rows_retried_in_a_new_batch_are_said_on_stderr(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=0, fail={"server_error": 0.5}, control_fail=0, seed=3)
    with EmulatorServer(config) as server:
        args = table_job(tmp_path, "enrich", "emulator", 20, "--poll-interval", "0.1")
        result, _ = maple_at(server.url, *args, MAPLE_EMULATOR_URL=server.url)
    assert result.returncode == 0, result.stderr
    [line] = retrying_lines(result.stderr)
    assert line.startswith("maple: retrying "), line
    assert "of job hostile shard s00000 in attempt 2 (server_error " in line
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_attempts"].max() <= 6  # 1 + server_error's 5 retries  # type: ignore[operator]


def test_an_outage_at_first_contact_is_ridden_out_and_each_row_paid_once(tmp_path: Path) -> None:
    """A service answering 503 (unavailable: not served, not billed) when the job starts is an
    outage, not the job's setup: the first request is resent with backoff, outside its row's
    budget, until the service is back, and the job finishes."""
    rows = 20
    with (
        EmulatorServer(EmulatorConfig(batch_seconds=0)) as server,
        gateway(server.url, "outage") as (gate, url),
    ):
        back = threading.Timer(OUTAGE_S, lambda: setattr(gate, "mode", "forward"))
        back.start()
        result, took = maple_at(url, *job(tmp_path, "enrich", rows))
        back.join()
        stats = server.stats()
    assert result.returncode == 0, result.stderr
    assert retrying_lines(result.stderr), result.stderr  # said while it waited
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * rows
    assert stats["requests_billed"] == rows and stats["bodies_billed_twice"] == 0, stats
    assert OUTAGE_S <= took < OUTAGE_S + 30
