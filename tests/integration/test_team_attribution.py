"""Teams in the provider's bill through Dagster and over real HTTP: an enrichment whose provider
resource carries the team attribution map as config sends its team's ``OpenAI-Project`` on the
upload and the batch create, and ``maple_reconcile`` with the same map compares per team (an
unknown project fails its check); the emulator's admin reports group by project and workspace,
and the engine reads them back per account."""

from datetime import UTC, datetime
from typing import Any

import dagster as dg
import httpx
import orjson
import polars as pl

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.binding import job_decorations, provider_key
from maple_assets.factory import enrichment
from maple_assets.graph.reconcile import reconcile_asset
from maple_assets.wiring import billing_resource, maple_resources
from maple_engine.providers.anthropic.billing import billing_report as anthropic_report
from maple_engine.providers.openai.billing import billing_report as openai_report
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.settings import Settings
from resources.providers import provider_resource
from tests.conftest import env_provider
from tests.integration.test_graph import run_graph

MAP = {"teams": {"bakery": {"openai_project": "proj_bakery"}}}


def test_a_resource_configured_map_puts_the_job_on_its_project(
    tmp_path: Any, emulator_server: EmulatorServer, tricky_table: pl.DataFrame, monkeypatch: Any
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{emulator_server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-maple")
    monkeypatch.delenv("MAPLE_TEAM_ATTRIBUTION", raising=False)

    @dg.asset
    def items() -> pl.DataFrame:
        return tricky_table

    en = enrichment(
        name="team_items", source=items, prompt="{title}", model="gpt-4o-mini",
        provider="openai", team="bakery", max_requests_per_batch=5,
    )  # fmt: skip
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    config = {"team_attribution": orjson.dumps(MAP).decode()}  # the map as resource config
    resources[provider_key("openai")] = provider_resource(env_provider("openai"), **config)
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "sk-admin-dagster")
    (tmp_path / "teams.json").write_bytes(orjson.dumps(MAP))
    monkeypatch.setenv("MAPLE_TEAM_ATTRIBUTION", str(tmp_path / "teams.json"))
    resources["maple_billing"] = billing_resource("openai", Settings.load(), by_team=True)
    with dg.instance_for_test() as instance:
        run_graph(en, [items], resources, instance)
        stats = emulator_server.stats()
        batches = -(-tricky_table.height // 5)
        assert stats["openai_project_files:proj_bakery"] == batches
        assert stats["openai_project_batches:proj_bakery"] == batches
        assert stats["batches_created"] == batches  # every batch on the project

        asset = reconcile_asset()
        calm = dg.materialize([asset], instance=instance, resources=resources)
        [evaluation] = calm.get_asset_check_evaluations()
        assert calm.success and evaluation.passed
        [mat] = calm.asset_materializations_for_node("maple_reconcile")
        assert "| bakery | proj_bakery | gpt-4o-mini |" in str(mat.metadata["table"].value)
        _chat(emulator_server, {"Authorization": "Bearer sk-maple", "OpenAI-Project": "proj_x"})
        flagged = dg.materialize([asset], instance=instance, resources=resources)
        [evaluation] = flagged.get_asset_check_evaluations()
        assert not evaluation.passed
        assert str(evaluation.metadata["lines"].value).startswith("unknown project: ")


def _chat(
    server: EmulatorServer, headers: dict[str, str], path: str = "/v1/chat/completions"
) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi there"}]}
    if path == "/v1/messages":
        body = {"model": "claude-haiku-4-5", "max_tokens": 16, **body}
        headers = {**headers, "anthropic-version": "2023-06-01"}
    answer = httpx.post(f"{server.url}{path}", json=body, headers=headers)
    assert answer.status_code == 200, answer.text


def test_the_reports_group_by_project_and_workspace() -> None:
    config = EmulatorConfig(batch_seconds=0, workspaces={"sk-ant-a": "wrkspc_a"})
    with EmulatorServer(config) as server:
        plain = OpenAIRealtimeProvider(
            base_url=f"{server.url}/v1",
            api_key="sk-maple",
            team_attribution=orjson.dumps(MAP).decode(),
        )
        provider = plain.decorated(job_decorations(plain, team="bakery"))
        _chat(server, {"Authorization": "Bearer sk-maple", **provider.extra_headers})
        _chat(server, {"Authorization": "Bearer sk-maple", "OpenAI-Project": "proj_other"})
        _chat(server, {"Authorization": "Bearer sk-maple"})
        _chat(server, {"x-api-key": "sk-ant-a"}, "/v1/messages")
        _chat(server, {"x-api-key": "sk-ant-b"}, "/v1/messages")
        today = datetime.now(UTC).date()

        grouped = openai_report(f"{server.url}/v1", "sk-admin-x", today, today, by_account=True)
        assert sorted((b.account or "-", b.model) for b in grouped) == [
            ("-", "gpt-4o-mini"),
            ("proj_bakery", "gpt-4o-mini"),
            ("proj_other", "gpt-4o-mini"),
        ]
        assert all(b.input_tokens > 0 and b.cost_usd > 0 for b in grouped)
        [whole] = openai_report(f"{server.url}/v1", "sk-admin-x", today, today)
        assert whole.account is None
        assert whole.cost_usd == sum(b.cost_usd for b in grouped)

        workspaces = anthropic_report(server.url, "sk-ant-admin01-x", today, today, by_account=True)
        assert sorted(b.account or "-" for b in workspaces) == ["-", "wrkspc_a"]

        only = httpx.get(
            f"{server.url}/v1/organization/usage/completions",
            params={
                "start_time": int(datetime.now(UTC).timestamp()) - 60,
                "group_by": "project_id",
                "project_ids": "proj_other",
            },
            headers={"Authorization": "Bearer sk-admin-x"},
        ).json()
        found = [r for b in only["data"] for r in b["results"]]
        assert [r["project_id"] for r in found] == ["proj_other"]


def test_files_and_batches_are_seen_from_their_project_only(
    emulator_server: EmulatorServer,
) -> None:
    """As OpenAI scopes them: a call without the project's header (or with another's) does not
    find its file or batch, so a job that dropped the header on any call would fail here."""
    url = f"{emulator_server.url}/v1"

    def headers(project: str | None) -> dict[str, str]:
        named = {"OpenAI-Project": project} if project else {}
        return {"Authorization": "Bearer sk-maple", **named}

    line = {
        "custom_id": "r0",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    }
    files = {"file": ("in.jsonl", orjson.dumps(line) + b"\n")}
    upload = httpx.post(
        f"{url}/files", headers=headers("proj_a"), data={"purpose": "batch"}, files=files
    ).json()
    assert httpx.get(f"{url}/files/{upload['id']}", headers=headers("proj_a")).status_code == 200
    for other in (None, "proj_b"):
        assert httpx.get(f"{url}/files/{upload['id']}", headers=headers(other)).status_code == 404
    create = {
        "input_file_id": upload["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    elsewhere = httpx.post(f"{url}/batches", headers=headers("proj_b"), json=create)
    assert elsewhere.status_code == 400
    assert "project does not have access" in elsewhere.json()["error"]["message"]
    batch = httpx.post(f"{url}/batches", headers=headers("proj_a"), json=create).json()
    assert httpx.get(f"{url}/batches/{batch['id']}", headers=headers(None)).status_code == 404
    listed = httpx.get(f"{url}/batches", headers=headers("proj_a")).json()["data"]
    assert [b["id"] for b in listed] == [batch["id"]]
    assert httpx.get(f"{url}/batches", headers=headers(None)).json()["data"] == []


def test_anthropic_batches_are_seen_from_their_workspace_only() -> None:
    """As Anthropic scopes them: a key of another workspace does not find a batch."""
    config = EmulatorConfig(batch_seconds=0, workspaces={"sk-ant-a": "wrkspc_a"})
    request = {
        "custom_id": "r0",
        "params": {
            "model": "claude-haiku-4-5",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "hi"}],
        },
    }
    with EmulatorServer(config) as server:

        def key(value: str) -> dict[str, str]:
            return {"x-api-key": value, "anthropic-version": "2023-06-01"}

        url = f"{server.url}/v1/messages/batches"
        batch = httpx.post(url, headers=key("sk-ant-a"), json={"requests": [request]}).json()
        assert httpx.get(f"{url}/{batch['id']}", headers=key("sk-ant-a")).status_code == 200
        assert httpx.get(f"{url}/{batch['id']}", headers=key("sk-ant-b")).status_code == 404
        assert httpx.get(url, headers=key("sk-ant-b")).json()["data"] == []
        listed = httpx.get(url, headers=key("sk-ant-a")).json()["data"]
        assert [b["id"] for b in listed] == [batch["id"]]


def test_reconcile_by_team_without_a_map_is_a_usage_error(tmp_path: Any, monkeypatch: Any) -> None:
    from click.testing import CliRunner

    from maple_assets.cli.commands import main

    monkeypatch.delenv("MAPLE_TEAM_ATTRIBUTION", raising=False)
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "sk-admin-x")
    args = ["reconcile", "--provider", "openai", "--by", "team", "--storage", str(tmp_path)]
    missing = CliRunner().invoke(main, args)
    assert missing.exit_code == 2, missing.output
    assert "--by team needs the team attribution map: set MAPLE_TEAM_ATTRIBUTION" in missing.output
    (tmp_path / "teams.json").write_text('{"teams": {"a": {"openai_project": ""}}}')
    monkeypatch.setenv("MAPLE_TEAM_ATTRIBUTION", str(tmp_path / "teams.json"))
    bad = CliRunner().invoke(main, args)
    assert bad.exit_code == 2 and "openai_project must be a non-empty string" in bad.output
