"""The team attribution map: its checks, what each provider takes of a team's entry, and the
ledger against a bill grouped by project (unknown projects flagged)."""

import re
from datetime import date
from pathlib import Path
from typing import TypeVar

import orjson
import polars as pl
import pytest

from maple_assets.binding import job_decorations
from maple_engine.errors import ConfigError
from maple_engine.ledger.reconcile import REPORT_SCHEMA, Tolerance, by_team, drift_lines
from maple_engine.providers.anthropic.batch import AnthropicBatchProvider
from maple_engine.providers.anthropic.realtime import AnthropicRealtimeProvider
from maple_engine.providers.attribution import EMPTY, load_attribution, parse_attribution
from maple_engine.providers.azure.batch import AzureOpenAIBatchProvider
from maple_engine.providers.base import ProviderModel
from maple_engine.providers.bedrock.batch import BedrockBatchProvider
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.openai.flex import OpenAIFlexProvider
from maple_engine.providers.registry import build_provider, capabilities

MAP = {
    "teams": {
        "catalog": {
            "openai_project": "proj_cat",
            "anthropic_workspace": "wrkspc_cat",
            "bedrock_tags": {"team": "catalog", "cost-center": "42"},
            "gemini_labels": {"team": "catalog"},
        },
        "search": {"openai_project": "proj_search"},
    }
}
TEXT = orjson.dumps(MAP).decode()
DAY = date(2026, 3, 1)


def test_a_valid_map_parses_and_round_trips() -> None:
    teams = parse_attribution(TEXT)
    assert teams.of("catalog").openai_project == "proj_cat"
    assert dict(teams.of("catalog").bedrock_tags) == {"team": "catalog", "cost-center": "42"}
    assert teams.of("nobody").openai_project is None
    assert teams.teams_of("project-header", "proj_search") == ["search"]
    assert teams.teams_of("workspace-key", "wrkspc_cat") == ["catalog"]
    assert parse_attribution('{"teams": {}}') == EMPTY


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1]", 'one key, "teams"'),
        ('{"teams": {}, "extra": 1}', "extra"),
        ('{"teams": []}', '"teams" must map team names'),
        ('{"teams": {"a": "proj_x"}}', "team 'a' must be an object"),
        ('{"teams": {"a": {"project": "proj_x"}}}', "unknown key(s) project"),
        ('{"teams": {"a": {"openai_project": ""}}}', "openai_project must be a non-empty"),
        ('{"teams": {"a": {"anthropic_workspace": 3}}}', "anthropic_workspace must be"),
        ('{"teams": {"a": {"bedrock_tags": {"team": 1}}}}', "bedrock_tags must map names"),
        ('{"teams": {"a": {"gemini_labels": {"Team": "x"}}}}', "not a valid label"),
        ("{nope", "is not JSON"),
    ],
)
def test_a_bad_map_names_the_problem_and_the_fix(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        parse_attribution(text)


def test_an_unreadable_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Cannot read the team attribution file .*MAPLE_TEAM"):
        load_attribution(str(tmp_path / "missing.json"))
    good = tmp_path / "teams.json"
    good.write_text(TEXT)
    assert load_attribution(str(good)).of("search").openai_project == "proj_search"


_M = TypeVar("_M", bound=ProviderModel)


def for_team(provider: _M, team: str) -> _M:
    """``provider`` attributing what it sends to ``team``'s accounts."""
    return provider.decorated(job_decorations(provider, team=team))


def test_openai_providers_send_the_teams_project_header() -> None:
    batch = OpenAIBatchProvider(api_key="k", team_attribution=TEXT)
    assert "OpenAI-Project" not in batch.extra_headers  # no team yet
    catalog = for_team(batch, "catalog")
    assert catalog.extra_headers == {"OpenAI-Project": "proj_cat"}
    assert for_team(catalog, "catalog") is catalog
    assert for_team(batch, "unmapped").extra_headers == {}
    flex = for_team(OpenAIFlexProvider(api_key="k", team_attribution=TEXT), "search")
    assert flex.extra_headers == {"OpenAI-Project": "proj_search"}
    mine = job_decorations(batch, headers={"openai-project": "proj_mine"}, team="catalog")
    given = batch.decorated(mine)
    assert given.extra_headers == {"openai-project": "proj_mine"}  # the user's header wins


@pytest.mark.parametrize("given", ["Catalog", " catalog", "CATALOG"])
def test_a_team_spelled_otherwise_than_the_map_is_refused_not_run_unattributed(given: str) -> None:
    batch = OpenAIBatchProvider(api_key="k", team_attribution=TEXT)
    with pytest.raises(ConfigError, match=f"--team {given}: the team attribution map names "):
        for_team(batch, given)
    assert for_team(batch, "unmapped").extra_headers == {}  # a team with no accounts: as ever


def test_apis_without_projects_send_no_project_header() -> None:
    azure = AzureOpenAIBatchProvider(api_key="k", base_url="https://x.openai.azure.com")
    assert (
        for_team(azure.model_copy(update={"team_attribution": TEXT}), "catalog").extra_headers == {}
    )
    together = build_provider("together", api_key="k", team_attribution=TEXT)
    assert for_team(together, "catalog").extra_headers == {}  # type: ignore[type-var]
    assert capabilities("azure-openai").attribution is None
    assert capabilities("together-realtime").attribution is None


def test_the_emulator_provider_takes_projects_as_openai_does() -> None:
    provider = build_provider("emulator", "http://127.0.0.1:1", team_attribution=TEXT)
    assert for_team(provider, "catalog").extra_headers == {"OpenAI-Project": "proj_cat"}  # type: ignore[type-var]


def test_an_anthropic_team_sends_with_its_workspaces_key() -> None:
    keys = orjson.dumps({"wrkspc_cat": "sk-ant-cat"}).decode()
    batch = AnthropicBatchProvider(api_key="sk-ant-org", team_attribution=TEXT, workspace_keys=keys)
    assert batch.sending_key(batch.api_key) == "sk-ant-org"
    catalog = for_team(batch, "catalog")
    assert catalog.sending_key(catalog.api_key) == "sk-ant-cat"
    assert catalog.twin_settings()["api_key"] == "sk-ant-cat"  # the deadline's twin too
    assert for_team(batch, "search").sending_key("sk-ant-org") == "sk-ant-org"  # no workspace
    realtime = AnthropicRealtimeProvider(api_key="sk-ant-org", team_attribution=TEXT)
    with pytest.raises(ConfigError, match="ANTHROPIC_WORKSPACE_KEYS has no API key"):
        for_team(realtime, "catalog").check_credentials()
    wrong = AnthropicBatchProvider(api_key="x", team_attribution=TEXT, workspace_keys="[1]")
    with pytest.raises(ConfigError, match="must be a JSON object") as caught:
        for_team(wrong, "catalog").check_credentials()
    assert "[1]" not in str(caught.value)


def test_bedrock_jobs_carry_the_teams_tags() -> None:
    provider = BedrockBatchProvider(storage_root="s3://b/p", team_attribution=TEXT)
    assert provider._tags() == {}
    tags = for_team(provider, "catalog")._tags()
    assert tags == {
        "tags": [{"key": "team", "value": "catalog"}, {"key": "cost-center", "value": "42"}]
    }


def _frame(*rows: tuple[object, ...], key: str) -> pl.DataFrame:
    schema = REPORT_SCHEMA | {key: pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def test_by_team_matches_projects_and_flags_an_unknown_one() -> None:
    teams = parse_attribution(TEXT)
    ledger = _frame(
        (DAY, "m", 10, 5, 1.0, "catalog"),
        (DAY, "m", 4, 2, 0.5, "search"),
        (DAY, "m", 1, 1, 0.1, "default"),
        key="team",
    )
    provider = _frame(
        (DAY, "m-2024-07-18", 10, 5, 1.0, "proj_cat"),
        (DAY, "m", 4, 2, 0.5, "proj_search"),
        (DAY, "m", 1, 1, 0.1, None),
        (DAY, "m", 3, 3, 0.001, "proj_rogue"),
        key="account",
    )
    table = by_team(ledger, provider, Tolerance(), teams, capabilities("openai"))
    rows = table.select("team", "account", "drifted", "unknown").rows()
    assert rows == [
        ("catalog", "proj_cat", False, False),
        ("(unknown)", "proj_rogue", True, True),  # a tenth of a cent, flagged all the same
        ("search", "proj_search", False, False),
        ("(unattributed)", None, False, False),
    ]
    [line] = drift_lines(table)
    assert line.startswith("unknown project: 2026-03-01 m: the provider billed $0.001000 to ")
    assert "proj_rogue" in line and "MAPLE_TEAM_ATTRIBUTION" in line


def test_by_team_drift_names_the_team() -> None:
    teams = parse_attribution(TEXT)
    ledger = _frame((DAY, "m", 10, 5, 1.0, "catalog"), key="team")
    provider = _frame((DAY, "m", 10, 5, 1.5, "wrkspc_cat"), key="account")
    table = by_team(ledger, provider, Tolerance(), teams, capabilities("anthropic"))
    assert drift_lines(table, "workspace") == [
        "drift: 2026-03-01 catalog m: ledger $1.000000, provider $1.500000 (+0.500000 USD, +50.00%)"
    ]
