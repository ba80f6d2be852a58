"""Azure OpenAI through the real wire: ``--provider azure-openai`` (Global Batch) and
``azure-openai-realtime`` against the emulator's Azure routes (``/openai/...``, the
``api-version`` query, the ``api-key`` header), in what the conformance suite
(``tests/conformance``: a job run to its end and booked, a kill -9 after the create, a wrong or
missing key, embeddings, cancel) does not hold every provider to: a kill -9 mid-download, the
endpoint and API version settings, a deployment nothing prices, the dry run's queue notes."""

from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.hostile import one_line, table_job

ROWS = 12
VERSION = "2024-10-21"
AZURE: dict[str, Any] = {"clean": True, "drop": ("AZURE_",)}  # none of the caller's settings


def azure(url: str, **more: str) -> dict[str, str]:
    return {"AZURE_OPENAI_ENDPOINT": url, "AZURE_OPENAI_API_KEY": "azure-key", **more}


def job(tmp_path: Path, command: str, provider: str, *extra: str) -> list[str]:
    return table_job(tmp_path, command, provider, ROWS, "--poll-interval", "0.1", *extra)


@pytest.mark.slow  # 10-25 s: the long pass (the default suite stays under 10 min)
def test_a_kill_9_mid_download_then_the_same_command_pays_nothing_twice(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, control_fail=0)) as server:
        args = job(tmp_path, "enrich", "azure-openai", "--max-requests-per-batch", "5")
        killed = maple(*args, **AZURE, **azure(server.url), MAPLE_CRASH_AT="mid_download")
        resumed = maple(*args, **AZURE, **azure(server.url))
        stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3  # the batch created before the kill was adopted


BAD = [
    ("azure-openai", "gpt-4o-mini", {"AZURE_OPENAI_API_KEY": "k"},
     "AZURE_OPENAI_ENDPOINT is not set"),
    ("azure-openai-realtime", "gpt-4o-mini", {"AZURE_OPENAI_API_KEY": "k"},
     "AZURE_OPENAI_ENDPOINT is not set"),
    ("azure-openai", "gpt-4o-mini", {**azure("URL"), "AZURE_OPENAI_API_VERSION": "latest"},
     "AZURE_OPENAI_API_VERSION='latest' is not an Azure OpenAI API version"),
    ("azure-openai", "my-team-deployment", azure("URL"),
     "No price known for model 'my-team-deployment' on provider 'azure-openai'"),
]  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=[f"{c[0]}:{c[3][:32]}" for c in BAD])
def test_a_missing_setting_is_one_line_and_exit_2_before_anything_is_sent(
    tmp_path: Path, case: tuple[str, str, dict[str, str], str]
) -> None:
    provider, model, env, says = case
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        given = {k: v.replace("URL", server.url) for k, v in env.items()}
        args = job(tmp_path, "enrich", provider)
        args[args.index("--model") + 1] = model
        run = maple(*args, **AZURE, **given)
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith("error: ") and says in line, line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


def test_a_deployment_nothing_prices_runs_with_allow_untracked_cost(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        args = job(tmp_path, "enrich", "azure-openai", "--allow-untracked-cost")
        args[args.index("--model") + 1] = "my-team-deployment"
        done = maple(*args, **AZURE, **azure(server.url))
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert out["llm_model"].unique().to_list() == ["my-team-deployment"]
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0


def test_the_emulator_refuses_a_call_without_api_version_or_key_as_azure_does() -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        chat = f"{server.url}/openai/deployments/gpt-4o-mini/chat/completions"
        body = {"messages": [{"role": "user", "content": "hi"}]}
        no_version = httpx.post(chat, json=body, headers={"api-key": "k"}, timeout=10)
        no_key = httpx.post(chat, params={"api-version": VERSION}, json=body, timeout=10)
        served = httpx.post(
            chat, params={"api-version": VERSION}, json=body, headers={"api-key": "k"}, timeout=10
        )
    assert no_version.status_code == 404
    assert no_version.json()["error"]["message"] == "Resource not found"
    assert no_key.status_code == 401
    assert served.status_code == 200 and served.json()["model"] == "gpt-4o-mini"


def test_the_emulator_refuses_an_api_version_on_the_v1_paths_as_azure_does() -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        batches = f"{server.url}/openai/v1/batches"
        versioned = httpx.get(batches, params={"api-version": VERSION}, headers={"api-key": "k"})
        by_key = httpx.get(batches, headers={"api-key": "k"}, timeout=10)
        by_bearer = httpx.get(batches, headers={"authorization": "Bearer k"}, timeout=10)
        no_key = httpx.get(batches, timeout=10)
        dated_bearer = httpx.get(
            f"{server.url}/openai/batches",
            params={"api-version": VERSION},
            headers={"authorization": "Bearer k"},
            timeout=10,
        )
    assert versioned.status_code == 400
    assert "api-version query parameter is not allowed" in versioned.json()["error"]["message"]
    assert (by_key.status_code, by_bearer.status_code) == (200, 200)
    assert (no_key.status_code, dated_bearer.status_code) == (401, 401)


def test_the_dry_run_says_azure_batches_do_not_expire_and_queue_per_deployment(
    tmp_path: Path,
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        args = job(tmp_path, "enrich", "azure-openai", "--dry-run")
        dry = maple(*args, **AZURE, **azure(server.url))
        stats = server.stats()
    assert dry.returncode == 0, dry.stderr
    [line] = [line for line in dry.stdout.splitlines() if line.startswith("batches")]
    assert "window 24h is a target: a batch that takes longer is not expired" in line
    assert "enqueued tokens limited per deployment" in line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


def test_batch_embeddings_on_azures_dated_api_are_refused_naming_v1_and_real_time(
    tmp_path: Path,
) -> None:
    """Azure's dated batch API takes chat lines only (its v1 API embeds: the conformance
    suite's v1 row runs ``maple embed``): ``maple embed --provider azure-openai`` on the dated
    API is one line and exit 2 naming ``AZURE_OPENAI_API_VERSION=v1`` and Azure's real-time
    provider, nothing sent."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        run = maple(*job(tmp_path, "embed", "azure-openai"), **AZURE, **azure(server.url))
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    said = run.stderr.replace("\n", " ")
    assert "AZURE_OPENAI_API_VERSION=v1" in said and "azure-openai-realtime" in said, said
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0
