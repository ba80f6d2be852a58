"""``maple enrich`` as a user runs it: a subprocess against a live emulator, output row by row."""

import subprocess
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from dagster import serialize_value
from polars.testing import assert_frame_equal

from emulator.server import EmulatorServer
from tests.e2e.cli import NO_OPENAI_KEY, maple

LLM_COLUMNS = [
    "llm_response",
    "llm_status",
    "llm_failure_class",
    "llm_error",
    "llm_attempts",
    "llm_input_tokens",
    "llm_output_tokens",
    "llm_cached_tokens",
    "llm_cache_write_tokens",
    "llm_reasoning_tokens",
    "llm_tokens_estimated",
    "llm_cost_usd",
    "llm_model",
    "llm_batch_id",
    "llm_reused",
]


def enrich(
    server: EmulatorServer, source: Path, tmp_path: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return maple(
        "enrich",
        str(source),
        "--prompt",
        "Brand of {title}: {description}",
        "--model",
        "gpt-4o-mini",
        "--provider",
        "emulator",
        "--storage",
        str(tmp_path / "store"),
        "--poll-interval",
        "0.1",
        "--max-requests-per-batch",
        "4",
        "--quiet",
        *extra,
        url=server.url,
        drop=NO_OPENAI_KEY,
    )


def expected_replies(table: pl.DataFrame) -> list[str]:
    return [
        f"echo: Brand of {t or ''}: {d or ''}"
        for t, d in table.select("title", "description").iter_rows()
    ]


def test_csv_in_csv_out(emulator_server: EmulatorServer, tricky_csv: Path, tmp_path: Path) -> None:
    result = enrich(emulator_server, tricky_csv, tmp_path)
    assert result.returncode == 0, result.stderr
    output = tricky_csv.with_name("tricky_enriched.csv")
    assert str(output) in result.stdout
    original = pl.read_csv(tricky_csv, infer_schema=False)
    merged = pl.read_csv(output, infer_schema=False)
    assert merged.columns == [*original.columns, *LLM_COLUMNS]
    assert_frame_equal(merged.select(original.columns), original)
    assert merged["llm_response"].to_list() == expected_replies(original)
    assert merged["llm_status"].to_list() == ["succeeded"] * original.height
    assert merged["llm_model"].to_list() == ["gpt-4o-mini"] * original.height
    assert merged["llm_batch_id"].n_unique() == 2  # 6 rows, 4 per batch
    assert "succeeded      6" in result.stdout


def test_parquet_in_parquet_out_keeps_types(
    emulator_server: EmulatorServer, tricky_parquet: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "enriched.parquet"
    result = enrich(emulator_server, tricky_parquet, tmp_path, "--output", str(out))
    assert result.returncode == 0, result.stderr
    original = pl.read_parquet(tricky_parquet)
    merged = pl.read_parquet(out)
    assert_frame_equal(merged.select(original.columns), original)
    assert merged.schema["price"] == pl.Float64
    assert merged.schema["llm_attempts"] == pl.Int64
    assert merged.schema["llm_cost_usd"] == pl.Float64
    assert merged["llm_response"].to_list() == expected_replies(original)


def test_parquet_in_csv_out(
    emulator_server: EmulatorServer, tricky_parquet: Path, tmp_path: Path
) -> None:
    out = tmp_path / "enriched.csv"
    result = enrich(emulator_server, tricky_parquet, tmp_path, "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert pl.read_csv(out).height == 6


def test_rerun_resumes_without_resubmitting(
    emulator_server: EmulatorServer, tricky_csv: Path, tmp_path: Path
) -> None:
    args = ("--job", "resume_me", "--output", str(tmp_path / "a.csv"))
    assert enrich(emulator_server, tricky_csv, tmp_path, *args).returncode == 0
    created = emulator_server.stats()["batches_created"]
    again = enrich(emulator_server, tricky_csv, tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert emulator_server.stats()["batches_created"] == created
    assert emulator_server.stats()["bodies_billed_twice"] == 0


@pytest.mark.slow  # ~15-21 s: two runs and a Dagster instance
def test_a_job_name_with_dashes_and_dots_runs_under_that_name(
    emulator_server: EmulatorServer, tricky_csv: Path, tmp_path: Path
) -> None:
    """Dagster names allow no ``-``: the job runs anyway, and the user sees the typed name."""
    result = enrich(emulator_server, tricky_csv, tmp_path, "--job", "rye-bread-2026")
    assert result.returncode == 0, result.stderr
    assert "rye-bread-2026" in result.stdout.splitlines()[0]
    assert (tmp_path / "store" / "rye-bread-2026").is_dir()
    again = enrich(emulator_server, tricky_csv, tmp_path, "--job", "rye-bread-2026")
    assert again.returncode == 0, again.stderr
    status = maple("status", "--storage", str(tmp_path / "store"), drop=NO_OPENAI_KEY)
    assert status.returncode == 0, status.stderr
    assert "rye-bread-2026" in status.stdout


def test_emulator_provider_runs_with_no_keys_and_no_server(tmp_path: Path) -> None:
    """The README's main-job command: the sample catalog on an in-process emulator."""
    result = maple(
        "enrich",
        str(Path(__file__).parents[2] / "maple_assets" / "data" / "grocery_catalog.csv"),
        "--prompt",
        "Extract the brand and size from: {title}",
        "--model",
        "gpt-4o-mini",
        "--provider",
        "emulator",
        "--output",
        str(tmp_path / "out.parquet"),
        "--storage",
        str(tmp_path / "store"),
        "--emulator-batch-seconds",
        "0",
        "--poll-interval",
        "0.1",
    )
    assert result.returncode == 0, result.stderr
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == 300 and set(out["llm_status"]) == {"succeeded"}


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("csv", ["--prompt", "{titel}"], "names column(s) ['titel']"),
        ("csv", ["--prompt", "{title"], "malformed"),
        ("empty", ["--prompt", "{title}"], "no rows"),
        ("txt", ["--prompt", "{title}"], "Unsupported file type"),
        ("missing", ["--prompt", "{title}"], "does not exist"),
        ("garbage", ["--prompt", "{title}"], "Cannot read the input"),
        ("csv", ["--prompt", "{title}", "--output", "SELF"], "would destroy the input"),
        ("clash", ["--prompt", "{title}"], "clash with the columns"),
        ("csv", ["--prompt", "{title}", "--max-batch-bytes", "50"], "over the batch file limit"),
    ],
)
def test_bad_input_fails_before_anything_is_uploaded(
    emulator_server: EmulatorServer, tmp_path: Path, setup: str, args: list[str], message: str
) -> None:
    source = tmp_path / ("in.txt" if setup == "txt" else "in.csv")
    if setup in {"csv", "txt"}:
        pl.DataFrame({"title": ["a", "b"]}).write_csv(source)
    elif setup == "empty":
        source.write_text("title\n")
    elif setup == "garbage":
        source.write_bytes(b"\x00\xff\xfe garbage \x00\n\x01")
        source = source.with_suffix(".parquet")
        source.write_bytes(b"not parquet at all")
    elif setup == "clash":
        pl.DataFrame({"title": ["a"], "llm_status": ["x"]}).write_csv(source)
    args = [str(source) if a == "SELF" else a for a in args]
    result = maple(
        "enrich",
        str(source),
        *args,
        "--model",
        "gpt-4o-mini",
        "--provider",
        "emulator",
        "--storage",
        str(tmp_path / "store"),
        url=emulator_server.url,
        drop=NO_OPENAI_KEY,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    stats = emulator_server.stats()
    assert stats["files_uploaded"] == 0 and stats["batches_created"] == 0


def test_secrets_never_reach_output_or_state(
    emulator_server: EmulatorServer, tmp_path: Path
) -> None:
    secret = "sk-test-SECRET-0123456789"
    source = tmp_path / "in.csv"
    pl.DataFrame({"title": ["a", "b"]}).write_csv(source)
    result = maple(
        "enrich",
        str(source),
        "--prompt",
        "{title}",
        "--model",
        "gpt-4o-mini",
        "--provider",
        "openai",
        "--storage",
        str(tmp_path / "store"),
        "--poll-interval",
        "0.1",
        OPENAI_API_KEY=secret,
        OPENAI_BASE_URL=f"{emulator_server.url}/v1",
    )
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout + result.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in stored_snapshots(tmp_path / "store" / "dagster")


def stored_snapshots(home: Path) -> str:
    """Every job snapshot of the runs in the Dagster instance at ``home``, serialized (they are
    stored compressed, so a byte search of the files would not see a key in them)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert runs
        snaps = [instance.get_job_snapshot(run.job_snapshot_id) for run in runs]
    return "".join(serialize_value(snap) for snap in snaps)


def test_realtime_limits_from_the_command_line(
    emulator_server: EmulatorServer, tricky_csv: Path, tmp_path: Path
) -> None:
    env = {"OPENAI_BASE_URL": f"{emulator_server.url}/v1", "OPENAI_API_KEY": "test"}
    common = [
        "enrich",
        str(tricky_csv),
        "--prompt",
        "{title}",
        "--model",
        "gpt-4o-mini",
        "--storage",
        str(tmp_path / "store"),
        "--poll-interval",
        "0.1",
        "--quiet",
    ]
    wrong = maple(*common, "--provider", "openai", "--rpm", "60", **env)
    assert wrong.returncode == 2
    assert "--rpm only apply to real-time providers" in wrong.stderr
    result = maple(
        *common,
        "--provider",
        "openai-realtime",
        "--rpm",
        "600",
        "--max-concurrency",
        "2",
        "--output",
        str(tmp_path / "rt.csv"),
        **env,
    )
    assert result.returncode == 0, result.stderr
    assert pl.read_csv(tmp_path / "rt.csv")["llm_status"].to_list() == ["succeeded"] * 6
    assert emulator_server.stats()["realtime_requests"] == 6
