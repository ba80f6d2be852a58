"""A new user's mistakes, as ``maple enrich`` meets them: one line on stderr, exit code 2, and
nothing uploaded (0 files and 0 batches at the emulator). Then the exit-code table (exit 0, every
row succeeded, is the conformance suite's first promise, ``tests/conformance``).

Mistakes the pre-flight catches run the CLI in-process (click's runner: the real command, no
interpreter start-up); the ones found while the Dagster graph reads the input run it as a
subprocess, so Dagster's own output would show if it leaked.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import NO_AWS, maple

DEAD = "http://127.0.0.1:1"  # nothing listens on port 1
CASES = ["bad_schema", "schema_subset", "nested_csv_output", "output_unwritable"]
CASES += ["output_s3_unreachable", "storage_s3_no_credentials", "param_not_json"]
CASES += ["retry_negative", "list_column_in_prompt", "long_job", "storage_read_only"]
CASES += ["missing_placeholder", "output_s3_no_credentials", "cost_db_not_a_url"]
CASES += ["non_utf8_csv_header"]
IN_GRAPH = ["ragged_csv", "non_utf8_csv", "context_window"]  # found by input_shards
DROPPED = ("AWS_", "OPENAI_")  # the developer's AWS and OpenAI settings


def enrich_args(server: EmulatorServer, source: Path | str, tmp: Path, *extra: str) -> list[str]:
    return [
        "enrich",
        str(source),
        "--model",
        "gpt-4o-mini",
        "--provider",
        "emulator",
        "--poll-interval",
        "0.1",
        "--quiet",
        *(() if "--storage" in extra else ("--storage", str(tmp / "store"))),
        *(() if "--prompt" in extra else ("--prompt", "About {title}")),
        *extra,
    ]


def enrich(
    server: EmulatorServer, source: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    args = enrich_args(server, source, tmp, *extra)
    settings = {**NO_AWS, "MAPLE_EMULATOR_URL": server.url, **(env or {})}
    return maple(*args, drop=DROPPED, **settings)


def enrich_in_process(
    server: EmulatorServer,
    source: Path | str,
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    from maple_assets.cli.commands import main

    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("AWS_")}
    full = {**unset, **NO_AWS, "MAPLE_EMULATOR_URL": server.url, **(env or {})}
    args = enrich_args(server, source, tmp, *extra)
    result = CliRunner().invoke(main, args, env=full)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    return lines[0]


def setup_case(case: str, tmp: Path) -> tuple[Path, list[str], dict[str, str]]:
    """The input, the extra arguments and the environment of one mistake."""
    source = tmp / "in.parquet"
    pl.DataFrame({"title": ["a", "b"], "tags": [["x"], ["y", "z"]]}).write_parquet(source)
    blocker = tmp / "a_file"
    blocker.write_text("x")
    schema = tmp / "schema.json"
    schema.write_bytes(orjson.dumps({"type": "object", "properties": {"a": {"type": "strng"}}}))
    subset = tmp / "subset.json"
    subset.write_bytes(orjson.dumps({"type": "object", "properties": {}}))
    ragged, non_utf8, huge = tmp / "ragged.csv", tmp / "latin1.csv", tmp / "huge.csv"
    ragged.write_text("title,size\na,1\nb,2,extra\n")
    non_utf8.write_bytes("title\nCr\u00e8me br\u00fbl\u00e9e\n".encode("latin-1"))
    latin_header = tmp / "latin1_header.csv"
    latin_header.write_bytes("title,d\u00e9tail\na,b\n".encode("latin-1"))
    pl.DataFrame({"title": ["ok", "x" * 600_000]}).write_csv(huge)
    s3 = {"AWS_ENDPOINT_URL": DEAD, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    cases: dict[str, tuple[Path, list[str], dict[str, str]]] = {
        "bad_schema": (source, ["--response-schema", str(schema)], {}),
        "schema_subset": (source, ["--response-schema", str(subset)], {}),
        "nested_csv_output": (source, ["--output", str(tmp / "out.csv")], {}),
        "output_unwritable": (source, ["--output", str(blocker / "out.parquet")], {}),
        "output_s3_unreachable": (source, ["--output", "s3://bucket/out.parquet"], s3),
        "storage_s3_no_credentials": (source, ["--storage", "s3://bucket/root"], {}),
        "output_s3_no_credentials": (source, ["--output", "s3://bucket/out.parquet"], {}),
        "param_not_json": (source, ["--param", "temperature={bad"], {}),
        "retry_negative": (source, ["--retry", "server_error=-1"], {}),
        "list_column_in_prompt": (source, ["--prompt", "{title}: {tags}"], {}),
        "long_job": (source, ["--job", "j" * 300], {}),
        "storage_read_only": (source, ["--storage", "/proc/maple-store"], {}),
        "ragged_csv": (ragged, [], {}),
        "non_utf8_csv": (non_utf8, [], {}),
        "non_utf8_csv_header": (latin_header, [], {}),
        "missing_placeholder": (source, ["--prompt", "{title} {colour}"], {}),
        "context_window": (huge, [], {}),
        "cost_db_not_a_url": (source, [], {"MAPLE_COST_DB": str(tmp / "costs.sqlite")}),
    }
    return cases[case]


EXPECTED = {
    "bad_schema": "not a valid JSON schema at properties/a/type",
    "schema_subset": '"additionalProperties": false',
    "nested_csv_output": "a CSV output",
    "output_unwritable": "is a file, not a folder",
    "output_s3_unreachable": f"cannot reach S3 at {DEAD}",
    "storage_s3_no_credentials": "no AWS credentials found",
    "output_s3_no_credentials": "no AWS credentials found",
    "param_not_json": """quote a string: --param 'temperature="{bad"'""",
    "retry_negative": "cannot be negative",
    "list_column_in_prompt": "write {tags:json}",
    "long_job": "300 bytes long",
    "storage_read_only": "is not writable",
    "ragged_csv": "Expected 2 columns, got 3",
    "non_utf8_csv": "is not valid UTF-8 (byte 0xe8",
    "non_utf8_csv_header": "line 1 is not valid UTF-8 (byte 0xe9 at byte 8",
    "missing_placeholder": "['colour']",
    "context_window": "Row 1 renders a request of about 150,00",
    "cost_db_not_a_url": "MAPLE_COST_DB is not a database URL: give sqlite:////",
}


@pytest.mark.parametrize("case", CASES + IN_GRAPH)
def test_a_mistake_is_one_line_exit_2_and_nothing_uploaded(
    emulator_server: EmulatorServer, tmp_path: Path, case: str
) -> None:
    source, extra, env = setup_case(case, tmp_path)
    run = enrich if case in IN_GRAPH else enrich_in_process
    result = run(emulator_server, source, tmp_path, *extra, env=env)
    assert result.returncode == 2, result.stderr
    assert EXPECTED[case] in one_line(result)
    stats = emulator_server.stats()
    assert (stats["files_uploaded"], stats["batches_created"]) == (0, 0)


def test_debug_shows_the_traceback(emulator_server: EmulatorServer, tmp_path: Path) -> None:
    source, _, _ = setup_case("ragged_csv", tmp_path)
    result = enrich(emulator_server, source, tmp_path, "--debug")
    assert result.returncode == 2
    assert "Traceback" in result.stderr and "Expected 2 columns" in result.stderr


@pytest.fixture
def table(tmp_path: Path) -> Path:
    source = tmp_path / "in.csv"
    pl.DataFrame({"title": ["a", "b", "c"]}).write_csv(source)
    return source


@pytest.fixture
def refusing() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, fail={"refused": 1.0})) as server:
        yield server


def test_exit_3_when_rows_failed(refusing: EmulatorServer, table: Path, tmp_path: Path) -> None:
    result = enrich(refusing, table, tmp_path, "--retry", "refused=0")
    assert result.returncode == 3, result.stderr
    assert "failed         3" in result.stdout and "refused      3" in result.stdout


def test_exit_4_in_one_line_when_the_realtime_endpoint_is_dead(table: Path, tmp_path: Path) -> None:
    result = maple(
        "enrich",
        str(table),
        "--prompt",
        "{title}",
        "--model",
        "gpt-4o-mini",
        "--provider",
        "openai-realtime",
        "--storage",
        str(tmp_path / "store"),
        "--retry",
        "server_error=0",
        "--quiet",
        drop=DROPPED,
        **NO_AWS,
        OPENAI_BASE_URL=f"{DEAD}/v1",
        OPENAI_API_KEY="test",
    )
    # two rows' first contacts fail alike: the job stops, and no row is failed for it
    assert result.returncode == 4, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"stopped: openai-realtime: POST {DEAD}/v1/chat/completions"), line
    assert "the same way (transport: ClientConnectorError)" in line
    assert "Check the base URL, the network and the timeout" in line
    assert not list((tmp_path / "store").rglob("chunk-*.parquet"))


def test_exit_4_when_the_job_stops_early(
    emulator_server: EmulatorServer, table: Path, tmp_path: Path
) -> None:
    result = enrich(emulator_server, table, tmp_path, "--budget", "0")
    assert result.returncode == 4, result.stderr
    assert "stopped: budget reached" in result.stderr
    assert emulator_server.stats()["batches_created"] == 0


def test_a_fresh_dagster_home_is_created_quietly(
    emulator_server: EmulatorServer, table: Path, tmp_path: Path
) -> None:
    home = tmp_path / "does" / "not" / "exist"
    result = enrich(emulator_server, table, tmp_path, env={"DAGSTER_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # no telemetry banner, no yaml warning
    assert "enabled: false" in (home / "dagster.yaml").read_text()


# Whoever started pytest may ignore SIGINT (a background CI job), and children inherit that;
# a user's shell does not: restore Python's own Ctrl-C handler, then run the CLI.
AS_A_SHELL_STARTS_IT = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'maple'; runpy.run_module('maple_assets.cli', run_name='__main__')"
)


@pytest.mark.slow
def test_ctrl_c_is_one_line_exit_130_and_the_rerun_resumes(table: Path, tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=4)) as server:
        args = [sys.executable, "-c", AS_A_SHELL_STARTS_IT]
        args += enrich_args(server, table, tmp_path, "--job", "ctrl_c")
        env = {**os.environ, "MAPLE_EMULATOR_URL": server.url}
        process = subprocess.Popen(
            args,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while server.stats()["batches_created"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr
        assert stderr.strip().splitlines() == [
            "stopped; batches already submitted keep running at the provider; rerun the same "
            "command to resume"
        ]
        status = maple(
            "status", "ctrl_c", "--storage", str(tmp_path / "store"), drop=DROPPED, **NO_AWS
        )
        assert "interrupted" in status.stdout.splitlines()[0], status.stdout
        again = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        assert again.returncode == 0, again.stderr
        assert server.stats()["batches_created"] == 1  # the rerun adopted the batch
    status = maple("status", "ctrl_c", "--storage", str(tmp_path / "store"), drop=DROPPED, **NO_AWS)
    assert "merged" in status.stdout.splitlines()[0], status.stdout


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("input", "does not exist (check the bucket and key)"),
        ("storage", "the bucket 'no-such-bucket' does not exist"),
        ("output", "the bucket 'no-such-bucket' does not exist"),
    ],
)
def test_s3_locations_are_checked_before_anything_is_uploaded(
    emulator_server: EmulatorServer,
    s3: dict[str, str],
    tmp_path: Path,
    where: str,
    message: str,
) -> None:
    table = tmp_path / "in.csv"
    pl.DataFrame({"title": ["a"]}).write_csv(table)
    missing = {
        "input": [],
        "storage": ["--storage", "s3://no-such-bucket/root"],
        "output": ["--output", "s3://no-such-bucket/out.csv"],
    }[where]
    source = "s3://maple-test/missing.csv" if where == "input" else table
    result = enrich_in_process(emulator_server, source, tmp_path, *missing, env=s3)
    assert result.returncode == 2, result.stderr
    line = one_line(result)
    assert message in line and "s3://" in line
    stats = emulator_server.stats()
    assert (stats["files_uploaded"], stats["batches_created"]) == (0, 0)


@pytest.mark.parametrize("command", ["costs", "stats"])
def test_a_mistyped_ledger_path_is_one_line_not_an_empty_ledger(
    command: str, tmp_path: Path
) -> None:
    from maple_assets.cli.commands import main

    missing = tmp_path / "nowhere" / "costs.sqlite"
    result = CliRunner().invoke(main, [command, "--db", f"sqlite:///{missing}"])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: No cost ledger at {missing}: nothing has recorded costs there. Check --db (or "
        "$MAPLE_COST_DB); a storage root's own ledger is found with --storage."
    )
    assert not missing.parent.exists()  # nothing made there either
