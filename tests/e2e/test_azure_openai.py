"""Azure OpenAI through the real wire: ``--provider azure-openai`` (Global Batch) and
``azure-openai-realtime`` against the emulator's Azure routes (``/openai/...``, the
``api-version`` query, the ``api-key`` header), each run to its end by the ``maple`` CLI: every
row, each billed once, booked by ``maple costs``. A kill -9 mid-job, then the same command,
adopts the batch and pays nothing twice. A missing setting, or a deployment nothing prices, is
one line, exit 2, nothing sent."""

import json
import subprocess
import sys
from pathlib import Path

import httpx
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.hostile import clean_env, one_line, table_job

ROWS = 12
VERSION = "2024-10-21"


def maple(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``maple ARGS`` with ``env`` and no Azure setting of the caller's environment."""
    base = {k: v for k, v in clean_env(**env).items() if not k.startswith("AZURE_")}
    return subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *args],
        capture_output=True, text=True, env={**base, **env}, timeout=180, check=False,
    )  # fmt: skip


def azure(url: str, **more: str) -> dict[str, str]:
    return {"AZURE_OPENAI_ENDPOINT": url, "AZURE_OPENAI_API_KEY": "azure-key", **more}


def job(tmp_path: Path, command: str, provider: str, *extra: str) -> list[str]:
    return table_job(tmp_path, command, provider, ROWS, "--poll-interval", "0.1", *extra)


def booked(tmp_path: Path) -> list[dict[str, object]]:
    shown = maple("costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout))


def batches(url: str) -> list[dict[str, object]]:
    answer = httpx.get(
        f"{url}/openai/batches", params={"api-version": VERSION},
        headers={"api-key": "azure-key"}, timeout=10,
    )  # fmt: skip
    return list(answer.json()["data"])


@pytest.mark.parametrize(
    ("command", "provider"),
    [("enrich", "azure-openai"), ("enrich", "azure-openai-realtime"),
     ("embed", "azure-openai-realtime")],
)  # fmt: skip
def test_a_job_runs_to_its_end_on_azures_routes_and_is_booked(
    tmp_path: Path, command: str, provider: str
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        args = job(tmp_path, command, provider, "--max-requests-per-batch", "5")
        done = maple(*args, **azure(server.url))
        stats = server.stats()
        made = batches(server.url)
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert (out["llm_cost_usd"] > 0).all()  # --model names the deployment: OpenAI's prices
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    if provider == "azure-openai":
        assert stats["batches_created"] == 3 == len(made)
        assert {b["endpoint"] for b in made} == {"/chat/completions"}
    else:
        assert stats["batches_created"] == 0 and stats["realtime_requests"] > 0
    [row] = booked(tmp_path)
    assert row["job"] == "hostile" and row["requests"] == ROWS
    assert float(str(row["cost_usd"])) == pytest.approx(out["llm_cost_usd"].sum())
    batch_priced = float(str(row["savings_usd"])) > 0  # booked at Azure's batch discount
    assert batch_priced == (provider == "azure-openai")


@pytest.mark.parametrize("point", ["after_create", "mid_download"])
def test_a_kill_9_then_the_same_command_adopts_the_azure_batch_paying_nothing_twice(
    tmp_path: Path, point: str
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, control_fail=0)) as server:
        args = job(tmp_path, "enrich", "azure-openai", "--max-requests-per-batch", "5")
        killed = maple(*args, **azure(server.url), MAPLE_CRASH_AT=point)
        resumed = maple(*args, **azure(server.url))
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
    ("azure-openai", "gpt-4o-mini", {"AZURE_OPENAI_ENDPOINT": "URL"},
     "AZURE_OPENAI_API_KEY is not set"),
    ("azure-openai-realtime", "gpt-4o-mini", {"AZURE_OPENAI_API_KEY": "k"},
     "AZURE_OPENAI_ENDPOINT is not set"),
    ("azure-openai-realtime", "gpt-4o-mini", {"AZURE_OPENAI_ENDPOINT": "URL"},
     "AZURE_OPENAI_API_KEY is not set"),
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
        run = maple(*args, **given)
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith("error: ") and says in line, line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


def test_a_deployment_nothing_prices_runs_with_allow_untracked_cost(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        args = job(tmp_path, "enrich", "azure-openai", "--allow-untracked-cost")
        args[args.index("--model") + 1] = "my-team-deployment"
        done = maple(*args, **azure(server.url))
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


def test_the_dry_run_says_azure_batches_do_not_expire_and_queue_per_deployment(
    tmp_path: Path,
) -> None:
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        dry = maple(*job(tmp_path, "enrich", "azure-openai", "--dry-run"), **azure(server.url))
        stats = server.stats()
    assert dry.returncode == 0, dry.stderr
    [line] = [line for line in dry.stdout.splitlines() if line.startswith("batches")]
    assert "window 24h is a target: a batch that takes longer is not expired" in line
    assert "enqueued tokens limited per deployment" in line
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


def test_batch_embeddings_on_azure_are_refused_naming_the_real_time_provider(
    tmp_path: Path,
) -> None:
    """Azure's batch documentation names chat lines only: ``maple embed --provider
    azure-openai`` is refused by the command's choices, which name the providers that embed
    (Azure's real-time one, Mistral's batch), nothing sent."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        run = maple(*job(tmp_path, "embed", "azure-openai"), **azure(server.url))
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    said = run.stderr.replace("\n", " ")
    assert "Invalid value for '--provider': 'azure-openai' is not one of" in said, said
    assert "'azure-openai-realtime'" in said and "'mistral'" in said
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0
