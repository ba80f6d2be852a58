"""The Python API in-process against the emulator over HTTP: ``maple_assets.enrich`` and
``submit`` (figures, reuse, resume, cancel), usage errors as ``UsageError``s before any upload,
and ``maple_job`` run from run config on a Dagster instance."""

import threading
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

import maple_assets
from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.rpc import ERROR, STATUS, enrich_config_schema
from maple_engine.spec import JobSpec

PROMPT = "Describe {title}"


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(12)]}).write_csv(path)
    return path


@pytest.fixture
def emulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> EmulatorServer:
    """An emulator (batches take ``batch_seconds``, 0 by default) the API finds through
    MAPLE_EMULATOR_URL, and a storage root under ``tmp_path``."""
    seconds = getattr(request, "param", 0.0)
    server = EmulatorServer(EmulatorConfig(batch_seconds=seconds)).start()
    request.addfinalizer(server.stop)
    monkeypatch.setenv("MAPLE_EMULATOR_URL", server.url)
    monkeypatch.setenv("MAPLE_STORAGE", str(tmp_path / "store"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    return server


def run(table: Path, **options: object) -> maple_assets.Result:
    return maple_assets.enrich(
        str(table), prompt=PROMPT, model="gpt-4o-mini", provider="emulator",
        poll_interval=0.1, **options,
    )  # fmt: skip


def test_enrich_returns_the_figures_of_the_run_and_reruns_pay_nothing_twice(
    table: Path, emulator: EmulatorServer
) -> None:
    first = run(table, job="items", max_requests_per_batch=5)
    out = pl.read_csv(first.output)
    assert (first.status, first.rows, first.succeeded, first.failed) == ("succeeded", 12, 12, 0)
    assert (first.sent, first.reused, first.not_sent) == (12, 0, 0)
    assert first.cost_usd == pytest.approx(out["llm_cost_usd"].sum()) and first.cost_usd > 0
    assert first.saved_usd > 0 and first.input_tokens == out["llm_input_tokens"].sum()
    assert emulator.stats()["requests_billed"] == 12

    again = run(table, job="items", max_requests_per_batch=5)  # the same job: resumed, done
    assert (again.status, again.rows, again.sent, again.cost_usd) == ("succeeded", 12, 0, 0.0)

    grown = pl.concat([pl.read_csv(table), pl.DataFrame({"title": ["new a", "new b"]})])
    grown.write_csv(table)
    update = run(table, job="items", max_requests_per_batch=5)  # a new version: 2 rows sent
    assert (update.rows, update.sent, update.reused) == (14, 2, 12)
    assert emulator.stats()["requests_billed"] == 14


def test_usage_errors_are_typed_one_liners_raised_before_any_upload(
    table: Path, emulator: EmulatorServer
) -> None:
    with pytest.raises(maple_assets.InvalidJob, match=r"\['nope'\].*Available columns"):
        maple_assets.enrich(str(table), prompt="{nope}", model="gpt-4o-mini", provider="emulator")
    with pytest.raises(maple_assets.InvalidJob, match=r"unknown option 'budgett'.*budget_usd"):
        run(table, budgett=1)
    with pytest.raises(maple_assets.InvalidJob, match="max_requests_per_batch=0"):
        run(table, max_requests_per_batch=0)
    with pytest.raises(maple_assets.UsageError, match="does not exist"):
        run(table.with_name("missing.csv"))
    with pytest.raises(maple_assets.UsageError):
        maple_assets.submit(str(table), prompt=" ", model="gpt-4o-mini", provider="emulator")
    assert emulator.stats()["files_uploaded"] == 0


def test_options_are_the_job_specs_fields_in_python_form(
    table: Path, emulator: EmulatorServer
) -> None:
    result = run(
        table, job="typed", params={"temperature": 0}, retries={"server_error": 1},
        budget=10.0, deadline="6h", team="catalog", output=str(table.with_name("out.parquet")),
    )  # fmt: skip
    assert result.status == "succeeded" and result.output.endswith("out.parquet")
    assert result.deadline is not None  # a deadline reports rows by batch and by real-time
    assert pl.read_parquet(result.output).height == 12


@pytest.mark.parametrize("emulator", [3.0], indirect=True)
def test_submit_returns_a_handle_that_waits_and_cancels(
    table: Path, emulator: EmulatorServer
) -> None:
    handle = maple_assets.submit(
        str(table), prompt=PROMPT, model="gpt-4o-mini", provider="emulator", job="slow",
        poll_interval=0.1,
    )  # fmt: skip
    assert handle.status() == "running"
    while emulator.stats()["batches_created"] == 0:
        threading.Event().wait(0.05)
    handle.cancel()
    stopped = handle.wait(timeout=60)
    assert (stopped.status, handle.status()) == ("stopped", "stopped")
    assert stopped.stopped is not None and "cancel" in stopped.stopped

    resumed = run(table, job="slow")  # the same job: the stop lifts, the rest is sent
    assert resumed.status == "succeeded" and resumed.succeeded == 12
    assert handle.progress().rows_done == 12


def test_maple_job_config_is_the_job_spec() -> None:
    keys = set(enrich_config_schema())
    spec = {"input" if f == "source" else "job" if f == "name" else f for f in JobSpec.model_fields}
    assert keys == spec | {"retry_failed", "wait", "base_url", "completion_window"}


def test_maple_job_runs_a_spec_from_run_config(table: Path, emulator: EmulatorServer) -> None:
    instance = dg.DagsterInstance.ephemeral()
    config = {"input": str(table), "prompt": PROMPT, "model": "gpt-4o-mini",
              "provider": "emulator", "job": "from-config", "team": "search"}  # fmt: skip
    done = maple_assets.maple_job().execute_in_process(
        run_config={"ops": {"enrich": {"config": config}}}, instance=instance
    )
    output = next(e for e in done.all_events if e.event_type_value == "STEP_OUTPUT")
    figures = {k: v.value for k, v in output.step_output_data.metadata.items()}
    assert (figures["rows"], figures["sent"], figures["status"]) == (12, 12, "succeeded")
    tags = instance.get_run_by_id(done.run_id).tags  # type: ignore[union-attr]
    assert tags["maple/job"] == "from-config" and tags["maple/team"] == "search"
    assert tags[STATUS] == "succeeded"

    bad = maple_assets.maple_job().execute_in_process(
        run_config={"ops": {"enrich": {"config": config | {"prompt": "{nope}"}}}},
        instance=instance,
        raise_on_error=False,
    )
    assert not bad.success
    failure = next(e for e in bad.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.step_failure_data.error.message  # type: ignore[union-attr]
    assert "['nope']" in message and "Available columns" in message
    line = instance.get_run_by_id(bad.run_id).tags[ERROR]  # type: ignore[union-attr]
    assert "['nope']" in line and "\n" not in line
    assert emulator.stats()["requests_billed"] == 12


@pytest.mark.slow  # about 15 s: a history of four batches, then a job that waits for its two
@pytest.mark.parametrize("emulator", [2.0], indirect=True)
def test_a_handle_shows_the_expected_finish_while_it_runs(
    table: Path, emulator: EmulatorServer
) -> None:
    assert run(table, job="history", max_requests_per_batch=3).succeeded == 12  # 4 batches
    handle = maple_assets.submit(
        str(table), prompt="Other {title}", model="gpt-4o-mini", provider="emulator",
        job="timed", poll_interval=0.1, max_requests_per_batch=6,
    )  # fmt: skip
    seen = None
    while (status := handle.status()) == "running":
        if status.eta_p90 is not None:
            seen = status
            break
        threading.Event().wait(0.05)
    assert seen is not None and seen.eta_p50 is not None and seen.eta_p90 is not None
    assert seen.eta_p50 <= seen.eta_p90 and "emulator gpt-4o-mini" in seen.eta.basis
    assert handle.progress().eta_p90 is not None
    handle.wait(timeout=60)
    done = handle.status()
    assert done == "succeeded" and done.eta_p90 is None and done.eta.basis == "every shard is final"
    assert time.time() <= seen.eta.p90_at + 10  # type: ignore[operator]
