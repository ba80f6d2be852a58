"""Every OpenAI-compatible batch API, through the real wire: ``--provider openai-compatible``
(``--base-url`` or ``MAPLE_BASE_URL``, ``MAPLE_API_KEY``) and the vendor profiles (``together``,
``groq``, ``xai``, ``doubleword``, each at ``<VENDOR>_BASE_URL`` with ``<VENDOR>_API_KEY``), each
run to its end against the emulator: every row, each billed once, the batches created with the
profile's completion window and file purpose, the cost priced. A missing base URL, a window the
profile does not take, or a model nothing prices is one line, exit 2, nothing sent. What every
profile and its real-time twin share with every provider (a wrong or missing key, a kill -9 after
the create, embeddings, cancel) is held by the conformance suite (``tests/conformance``)."""

from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import one_line, table_job

ROWS = 12
WINDOWS = ("24h", "7d", "1h")  # what the emulator's batch creates accept here
# --provider, its variables' prefix, a model its price source knows, extra flags, the window
# and file purpose its batches must be created with
PROFILES = [
    ("openai-compatible", "MAPLE", "gpt-4o-mini", (), "24h", "batch"),
    ("together", "TOGETHER", "meta-llama/Llama-3.3-70B-Instruct-Turbo", (), "24h", "batch-api"),
    ("groq", "GROQ", "llama-3.1-8b-instant", ("--completion-window", "7d"), "7d", "batch"),
    ("xai", "XAI", "grok-3-mini", (), "24h", "batch"),
    ("doubleword", "DOUBLEWORD", "Qwen/Qwen3-14B-FP8", ("--completion-window", "1h"), "1h",
     "batch"),
]  # fmt: skip


def job(tmp_path: Path, provider: str, model: str, *extra: str) -> list[str]:
    args = table_job(tmp_path, "enrich", provider, ROWS, "--poll-interval", "0.1", *extra)
    args[args.index("--model") + 1] = model
    return args


def listed(url: str, path: str) -> list[dict[str, object]]:
    answer = httpx.get(f"{url}/v1/{path}", headers={"Authorization": "Bearer k"}, timeout=10)
    return list(answer.json()["data"])


@pytest.mark.parametrize("profile", PROFILES, ids=[p[0] for p in PROFILES])
def test_each_profile_runs_a_batch_job_to_the_end_through_the_emulator(
    tmp_path: Path, profile: tuple[str, str, str, tuple[str, ...], str, str]
) -> None:
    provider, prefix, model, extra, window, purpose = profile
    config = EmulatorConfig(batch_seconds=0, control_fail=0, completion_windows=WINDOWS)
    with EmulatorServer(config) as server:
        env = {f"{prefix}_API_KEY": "sk-profile-test", f"{prefix}_BASE_URL": f"{server.url}/v1"}
        args = job(tmp_path, provider, model, "--max-requests-per-batch", "5", *extra)
        done = maple(*args, clean=True, **env)
        stats = server.stats()
        batches, files = listed(server.url, "batches"), listed(server.url, "files")
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert (out["llm_cost_usd"] > 0).all()  # priced by the profile's price source
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3 == len(batches)
    assert {b["completion_window"] for b in batches} == {window}
    assert {f["purpose"] for f in files if f["purpose"] != "batch_output"} == {purpose}


def test_the_generic_profile_takes_its_base_url_from_the_flag(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        args = job(tmp_path, "openai-compatible", "gpt-4o-mini", "--base-url", f"{server.url}/v1")
        done = maple(*args, clean=True, MAPLE_API_KEY="sk-generic")
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0


BAD = [
        ("openai-compatible", "gpt-4o-mini", (), {"MAPLE_API_KEY": "k"},
         "needs the API's base URL: give --base-url or set MAPLE_BASE_URL"),
        ("groq", "llama-3.1-8b-instant", ("--completion-window", "30d"), {"GROQ_API_KEY": "k"},
         "--completion-window '30d': groq accepts 24h, 48h, 72h, 1d"),
        ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", ("--completion-window", "1h"),
         {"TOGETHER_API_KEY": "k"}, "together accepts 24h; give one of them"),
        ("openai-realtime", "gpt-4o-mini", ("--completion-window", "24h"),
         {"OPENAI_API_KEY": "k"}, "--completion-window only applies to batch APIs"),
        ("openai-compatible", "house-model-7b", (), {"MAPLE_API_KEY": "k"},
         "No price known for model 'house-model-7b' on provider 'openai-compatible'"),
        ("bedrock", "gpt-4o-mini", ("--base-url", "http://x/v1"), {},
         "--base-url does not apply to bedrock"),
]  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=[f"{c[0]}:{c[4][:30]}" for c in BAD])
def test_a_bad_setting_is_one_line_and_exit_2_before_anything_is_sent(
    tmp_path: Path, case: tuple[str, str, tuple[str, ...], dict[str, str], str]
) -> None:
    provider, model, extra, env, says = case
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        where = {k.replace("_API_KEY", "_BASE_URL"): f"{server.url}/v1" for k in env}
        if provider == "openai-compatible" and "base URL" in says:
            where = {}
        run = maple(*job(tmp_path, provider, model, *extra), clean=True, **env, **where)
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith("error: ") and says in line, line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


@pytest.mark.parametrize(  # after_create: conformance (default suite); these: the long pass
    "point", [pytest.param(p, marks=pytest.mark.slow) for p in ("after_upload", "mid_download")]
)
def test_a_kill_9_then_the_same_command_resumes_the_generic_profile_paying_nothing_twice(
    tmp_path: Path, point: str
) -> None:
    config = EmulatorConfig(batch_seconds=0.2, control_fail=0)
    with EmulatorServer(config) as server:
        env = {"MAPLE_API_KEY": "sk-generic", "MAPLE_BASE_URL": f"{server.url}/v1"}
        args = job(tmp_path, "openai-compatible", "gpt-4o-mini", "--max-requests-per-batch", "5")
        killed = maple(*args, clean=True, **env, MAPLE_CRASH_AT=point)
        resumed = maple(*args, clean=True, **env)
        stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3  # the batch created before the kill was adopted


def test_a_twin_without_its_base_url_is_one_line_before_anything_is_sent(tmp_path: Path) -> None:
    no_url = maple(
        *job(tmp_path, "openai-compatible-realtime", "gpt-4o-mini"), clean=True, MAPLE_API_KEY="k"
    )
    assert no_url.returncode == 2
    assert "needs the API's base URL: give --base-url or set MAPLE_BASE_URL" in one_line(
        no_url.stderr
    )


@pytest.mark.slow  # the deadline has to pass
def test_a_deadline_on_a_profile_falls_back_on_its_real_time_twin(tmp_path: Path) -> None:
    config = EmulatorConfig(batch_seconds=25.0, control_fail=0)
    with EmulatorServer(config) as server:
        env = {"TOGETHER_API_KEY": "k", "TOGETHER_BASE_URL": f"{server.url}/v1"}
        args = job(
            tmp_path, "together", "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            "--max-requests-per-batch", "6", "--deadline", "8s",
        )  # fmt: skip
        done = maple(*args, clean=True, **env)
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["realtime_requests"] > 0 and stats["bodies_billed_twice"] == 0


def test_a_window_the_server_refuses_leaves_no_uploaded_file_behind(tmp_path: Path) -> None:
    """The profile takes ``7d``; this server's creates take ``24h`` only: the create is refused
    after the upload, and the file it would have read is deleted."""
    config = EmulatorConfig(batch_seconds=0, control_fail=0, completion_windows=("24h",))
    with EmulatorServer(config) as server:
        env = {"GROQ_API_KEY": "sk-profile-test", "GROQ_BASE_URL": f"{server.url}/v1"}
        args = job(tmp_path, "groq", "llama-3.1-8b-instant", "--completion-window", "7d")
        done = maple(*args, clean=True, **env)
        stats, files = server.stats(), listed(server.url, "files")
    assert done.returncode != 0
    assert "completion_window" in one_line(done.stderr)
    assert stats["files_uploaded"] >= 1 and stats["batches_created"] == 0
    assert files == []  # deleted, not left at the provider
