"""One enrichment as a deployment's code location runs it, for the tests of Dagster's executors
and run launchers (tests/hosts/test_celery_hosts.py, tests/integration/test_deployment_docker.py):
its input table on the S3 server, a job that starts it (``dagster job launch -j start_items``),
and what every such test asserts at the end: every row once in the output, nothing paid twice."""

import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import sqlalchemy as sa

from maple_engine.storage.storage import Storage
from tests.hosts.harness import BIN

JOB = "items"
SOURCE = "s3://maple/items.parquet"


def code_location(per_batch: int, executor: str, preamble: str = "") -> str:
    """A code location (``defs.py``) with the enrichment ``items`` over ``SOURCE`` on the
    emulator, batch, ``per_batch`` requests a batch, its steps on ``executor`` (an expression)."""
    return textwrap.dedent(
        """
        import dagster as dg

        from maple_assets.factory import enrichment
        from maple_assets.wiring import maple_resources
        {preamble}
        items = enrichment(name={job!r}, source={source!r}, prompt="Name {{title}}",
                           model="gpt-4o-mini", provider="emulator",
                           max_requests_per_batch={per_batch}, poll_interval_s=1)
        defs = dg.Definitions(
            assets=items.assets,
            asset_checks=items.checks,
            sensors=items.sensors,
            jobs=[dg.define_asset_job("start_items", selection=[items.key("input_shards")])],
            resources=maple_resources([items]),
            executor={executor},
        )
        """
    ).format(
        preamble=textwrap.dedent(preamble), job=JOB, source=SOURCE, per_batch=per_batch,
        executor=executor,
    )  # fmt: skip


def write_source(rows: int) -> list[str]:
    """The input table on the S3 server of the environment; returns its titles."""
    titles = [f"item {i}" for i in range(rows)]
    options = Storage("s3://maple/root").s3.polars_options()
    pl.DataFrame({"title": titles}).write_parquet(SOURCE, storage_options=options)
    return titles


def launch(
    workspace: Path,
    env: dict[str, str],
    on: Callable[[list[str]], list[str]] = list,
    timeout: float = 120,
) -> None:
    """``dagster job launch -j start_items`` through the instance's run launcher (run as
    ``on(argv)``: on a simulated host, say), again while the code server is still loading."""
    argv = on([str(BIN / "dagster"), "job", "launch", "-w", str(workspace), "-j", "start_items"])
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            argv, cwd=workspace.parent, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stdout + done.stderr
        time.sleep(2)


def runs_story(instance: dg.DagsterInstance) -> str:
    """Every run of the instance: status, assets, parent run, and its last events."""
    lines = []
    for run in instance.get_runs(limit=40):
        keys = sorted(k.to_user_string() for k in run.asset_selection or ())
        parent = run.tags.get("dagster/parent_run_id", "")[:8]
        events = [e.message[:160] for e in instance.all_logs(run.run_id)][-3:]
        lines.append(f"{run.run_id[:8]} {run.status.value} {keys} parent={parent} {events}")
    return "\n".join(lines)


def merged(storage: Storage) -> dict[str, Any] | None:
    key = f"{JOB}/state/merged.json"
    return dict(storage.read_json(key)) if storage.exists(key) else None


def assert_every_row_once(
    storage: Storage, titles: list[str], stats: dict[str, Any], batches: int, pg_url: str
) -> None:
    """The merged output holds every title once, answered; the emulator billed each request
    once (``stats``: its ``/_emulator/stats``) in ``batches`` batches; the ledger agrees."""
    info = merged(storage)
    assert info is not None and info["rows"] == len(titles), info
    assert stats["bodies_billed_twice"] == 0, stats
    assert stats["requests_billed"] == len(titles), stats
    assert stats["batches_created"] == batches, stats
    out = pl.read_parquet(str(info["path"]), storage_options=storage.s3.polars_options())
    assert sorted(out["title"].to_list()) == sorted(titles)
    assert out["llm_status"].to_list() == ["succeeded"] * len(titles)
    assert ledger_requests(pg_url, JOB) == len(titles)


def ledger_requests(pg_url: str, job: str) -> int | None:
    """The requests the ledger at ``pg_url`` booked for ``job``."""
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(
                "SELECT sum(requests) FROM attempt_costs WHERE job = %(job)s", {"job": job}
            ).scalar()
    finally:
        engine.dispose()
