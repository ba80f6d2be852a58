"""Teams in the provider's bill, as a user runs it: two teams' ``maple enrich`` jobs on two
OpenAI projects (one batch, one real time) and two Anthropic workspaces, through the emulator;
``maple reconcile --by team`` matches each team to the cent, and spend on a project the team
attribution map does not know is flagged (exit 3 naming it). A bad map is exit 2 before any
upload."""

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.status import provider_for
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage
from tests.e2e.cli import NO_OPENAI_KEY, maple

pytestmark = pytest.mark.slow  # five `maple` runs against a live emulator: ~30 s

ADMIN = {"OPENAI_ADMIN_KEY": "sk-admin-teams", "ANTHROPIC_ADMIN_KEY": "sk-ant-admin01-teams"}
TEAMS = {
    "catalog": {
        "openai_project": "proj_catalog",
        "anthropic_workspace": "wrkspc_catalog",
        "bedrock_tags": {"team": "catalog"},
        "gemini_labels": {"team": "catalog"},
    },
    "search": {"openai_project": "proj_search", "anthropic_workspace": "wrkspc_search"},
}
WORKSPACE_KEYS = {"wrkspc_catalog": "sk-ant-catalog", "wrkspc_search": "sk-ant-search"}
JOBS = (  # job, team, provider, model
    ("catalog-batch", "catalog", "openai", "gpt-4o-mini"),
    ("search-live", "search", "openai-realtime", "gpt-4o-mini"),
    ("catalog-claude", "catalog", "anthropic", "claude-haiku-4-5"),
    ("search-claude", "search", "anthropic", "claude-haiku-4-5"),
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmulatorServer, Path]]:
    tmp = tmp_path_factory.mktemp("teams")
    table = tmp / "items.csv"
    pl.DataFrame({"title": [f"item {i}" for i in range(12)]}).write_csv(table)
    (tmp / "teams.json").write_bytes(orjson.dumps({"teams": TEAMS}))
    workspaces = {key: workspace for workspace, key in WORKSPACE_KEYS.items()}
    with EmulatorServer(EmulatorConfig(batch_seconds=0.5, workspaces=workspaces)) as server:
        for job, team, provider, model in JOBS:
            done = maple(
                "enrich", str(table), "--prompt", "Name {title}", "--model", model,
                "--provider", provider, "--team", team, "--job", job,
                "--storage", str(tmp / "store"), "--output", str(tmp / f"{job}.csv"),
                "--max-requests-per-batch", "6", "--poll-interval", "0.1", "--quiet",
                drop=NO_OPENAI_KEY, **_env(server, tmp),
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        yield server, tmp


def _env(server: EmulatorServer, tmp: Path, **extra: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": "sk-maple",
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-maple",
        "ANTHROPIC_WORKSPACE_KEYS": orjson.dumps(WORKSPACE_KEYS).decode(),
        "MAPLE_TEAM_ATTRIBUTION": str(tmp / "teams.json"),
        **ADMIN,
        **extra,
    }


def _reconcile(server: EmulatorServer, tmp: Path, provider: str, **env: str) -> Any:
    store = str(tmp / "store")
    args = ("reconcile", "--storage", store, "--provider", provider, "--by", "team")
    return maple(*args, drop=NO_OPENAI_KEY, **_env(server, tmp, **env))


def _rows(out: str) -> dict[tuple[str, str], list[str]]:
    """The table's rows by (team, account)."""
    header, _rule, *rows = out.splitlines()
    assert header.split()[:4] == ["day", "team", header.split()[2], "model"]
    return {(r.split()[1], r.split()[2]): r.split() for r in rows}


def test_the_project_header_goes_on_every_call(setup: tuple[EmulatorServer, Path]) -> None:
    server, _ = setup
    stats = server.stats()
    assert stats["openai_project_files:proj_catalog"] == 2  # 12 rows in shards of 6
    assert stats["openai_project_batches:proj_catalog"] == 2
    assert stats["openai_project_requests:proj_search"] == 12  # the real-time job's calls
    assert not [k for k in stats if k.startswith("openai_project_") and "proj_catalog" not in k
                and "proj_search" not in k]  # fmt: skip


def test_the_providers_reports_group_by_project_and_workspace(
    setup: tuple[EmulatorServer, Path],
) -> None:
    server, _ = setup
    now = int(datetime.now(UTC).timestamp())
    openai = httpx.get(
        f"{server.url}/v1/organization/costs",
        params={"start_time": now - 86_400, "group_by": "project_id"},
        headers={"Authorization": f"Bearer {ADMIN['OPENAI_ADMIN_KEY']}"},
    ).json()
    projects = {r["project_id"] for b in openai["data"] for r in b["results"]}
    assert projects == {"proj_catalog", "proj_search"}
    day = datetime.now(UTC).date().isoformat()
    anthropic = httpx.get(
        f"{server.url}/v1/organizations/usage_report/messages",
        params={"starting_at": f"{day}T00:00:00Z", "group_by[]": "workspace_id"},
        headers={"x-api-key": ADMIN["ANTHROPIC_ADMIN_KEY"], "anthropic-version": "2023-06-01"},
    ).json()
    workspaces = {r["workspace_id"] for b in anthropic["data"] for r in b["results"]}
    assert workspaces == {"wrkspc_catalog", "wrkspc_search"}


def test_two_teams_reconcile_to_the_cent(setup: tuple[EmulatorServer, Path]) -> None:
    server, tmp = setup
    for provider, accounts in (
        ("openai", ("proj_catalog", "proj_search")),
        ("anthropic", ("wrkspc_catalog", "wrkspc_search")),
    ):
        out = _reconcile(server, tmp, provider)
        assert out.returncode == 0, out.stdout + out.stderr
        rows = _rows(out.stdout)
        assert set(rows) == {("catalog", accounts[0]), ("search", accounts[1])}
        for row in rows.values():
            ledger_usd, provider_usd = float(row[6]), float(row[7])
            assert ledger_usd > 0
            assert round(ledger_usd, 2) == round(provider_usd, 2)
            assert abs(ledger_usd - provider_usd) < 1e-6
            assert row[-1] == "ok"


def test_spend_on_a_project_the_map_does_not_know_is_flagged(
    setup: tuple[EmulatorServer, Path],
) -> None:
    server, tmp = setup
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
    headers = {"Authorization": "Bearer sk-maple", "OpenAI-Project": "proj_rogue"}
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers)
    assert answer.status_code == 200, answer.text

    out = _reconcile(server, tmp, "openai")
    assert out.returncode == 3, out.stdout + out.stderr
    rows = _rows(out.stdout)
    assert rows[("(unknown)", "proj_rogue")][-1] == "UNKNOWN"
    assert rows[("catalog", "proj_catalog")][-1] == "ok"  # the known teams still match
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("unknown project: ")
    assert "proj_rogue" in lines[0] and "MAPLE_TEAM_ATTRIBUTION" in lines[0]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "is not JSON"),
        ('{"teams": {"catalog": {"openai_projekt": "proj_x"}}}', "unknown key(s) openai_projekt"),
        ('{"teams": {"catalog": {"openai_project": 7}}}', "openai_project must be a non-empty"),
        ('{"teams": {"catalog": {"bedrock_tags": ["team"]}}}', "bedrock_tags must map names"),
        (None, "Cannot read the team attribution file"),
    ],
)
def test_a_bad_map_is_exit_2_before_any_upload(
    setup: tuple[EmulatorServer, Path], text: str | None, named: str
) -> None:
    server, tmp = setup
    bad = tmp / "bad.json"
    bad.unlink(missing_ok=True)
    if text is not None:
        bad.write_text(text)
    before = server.stats().get("files_uploaded", 0)
    done = maple(
        "enrich", str(tmp / "items.csv"), "--prompt", "Say {title}", "--model", "gpt-4o-mini",
        "--team", "catalog", "--job", "bad-map", "--storage", str(tmp / "store"), "--quiet",
        drop=NO_OPENAI_KEY,
        **_env(server, tmp, MAPLE_TEAM_ATTRIBUTION=str(bad)),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in done.stderr and "MAPLE_TEAM_ATTRIBUTION" in done.stderr
    assert server.stats().get("files_uploaded", 0) == before


def test_cancel_and_status_act_on_the_jobs_project(
    setup: tuple[EmulatorServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``maple cancel`` and ``maple status`` rebuild a job's provider from its stored spec: on
    its team's project, where its batches are."""
    server, tmp = setup
    for name, value in _env(server, tmp).items():
        monkeypatch.setenv(name, value)
    state = JobState(Storage(str(tmp / "store")), "catalog-batch")
    assert provider_for(state).extra_headers == {"OpenAI-Project": "proj_catalog"}
    status = maple(
        "status",
        "catalog-batch",
        "--storage",
        str(tmp / "store"),
        drop=NO_OPENAI_KEY,
        **_env(server, tmp),
    )
    assert status.returncode == 0, status.stderr
