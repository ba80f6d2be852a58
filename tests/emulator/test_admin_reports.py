"""The providers' admin usage and cost reports on the emulator: documented shapes, paging,
admin keys only, and one organisation's spend from all of its keys."""

from datetime import UTC, datetime, timedelta

import httpx

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer

ADMIN = {"Authorization": "Bearer sk-admin-a"}
ANT_ADMIN = {"x-api-key": "sk-ant-admin01-a", "anthropic-version": "2023-06-01"}
ORGS = {"sk-b": "org-b", "sk-admin-b": "org-b"}


def _chat(server: EmulatorServer, key: str, model: str) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "x" * 400}]}
    r = httpx.post(
        f"{server.url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    )
    assert r.status_code == 200


def _message(server: EmulatorServer, key: str) -> None:
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
    }
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    assert httpx.post(f"{server.url}/v1/messages", json=body, headers=headers).status_code == 200


def test_openai_usage_and_costs_pages() -> None:
    start = int((datetime.now(UTC) - timedelta(days=2)).timestamp())
    with EmulatorServer(EmulatorConfig(organizations=ORGS)) as server:
        for key in ("sk-a1", "sk-a2"):
            _chat(server, key, "gpt-4o-mini")
        _chat(server, "sk-b", "gpt-4o-mini")  # another organisation
        params = {
            "start_time": start,
            "bucket_width": "1d",
            "group_by": ["model", "batch"],
            "limit": 2,
        }
        url = f"{server.url}/v1/organization/usage/completions"
        first = httpx.get(url, params=params, headers=ADMIN).json()
        assert first["object"] == "page" and first["has_more"] and first["next_page"]
        assert [b["object"] for b in first["data"]] == ["bucket", "bucket"]
        assert all(b["results"] == [] for b in first["data"])
        rest = httpx.get(url, params=params | {"page": first["next_page"]}, headers=ADMIN).json()
        [today] = rest["data"]
        [result] = today["results"]
        assert result["object"] == "organization.usage.completions.result"
        assert (result["model"], result["batch"], result["num_model_requests"]) == (
            "gpt-4o-mini",
            False,
            2,
        )
        assert result["input_tokens"] == 2 * (100 + 3 + 3)
        assert today["end_time"] - today["start_time"] <= 86_400

        costs = httpx.get(
            f"{server.url}/v1/organization/costs",
            params={"start_time": start, "group_by": "line_item", "limit": 7},
            headers=ADMIN,
        ).json()
        items = [r for b in costs["data"] for r in b["results"]]
        assert {r["line_item"] for r in items} == {"gpt-4o-mini, input", "gpt-4o-mini, output"}
        assert all(r["amount"]["currency"] == "usd" and r["amount"]["value"] > 0 for r in items)
        other = httpx.get(
            url, params=params | {"page": "2"}, headers={"Authorization": "Bearer sk-admin-b"}
        )
        assert other.json()["data"][0]["results"][0]["num_model_requests"] == 1

        refused = httpx.get(url, params=params, headers={"Authorization": "Bearer sk-a1"})
        assert (
            refused.status_code == 403
            and refused.json()["error"]["code"] == "insufficient_permissions"
        )


def test_anthropic_usage_and_cost_reports() -> None:
    start = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT00:00:00Z")
    with EmulatorServer(EmulatorConfig()) as server:
        _message(server, "sk-ant-a")
        usage = httpx.get(
            f"{server.url}/v1/organizations/usage_report/messages",
            params={"starting_at": start, "group_by[]": ["model", "service_tier"]},
            headers=ANT_ADMIN,
        ).json()
        assert set(usage) == {"data", "has_more", "next_page"} and not usage["has_more"]
        [result] = [r for b in usage["data"] for r in b["results"]]
        assert (result["model"], result["service_tier"]) == ("claude-haiku-4-5", "standard")
        assert result["uncached_input_tokens"] > 0 and result["output_tokens"] > 0
        assert usage["data"][0]["starting_at"] == start
        costs = httpx.get(
            f"{server.url}/v1/organizations/cost_report",
            params={"starting_at": start, "group_by[]": "description"},
            headers=ANT_ADMIN,
        ).json()
        [cost] = [r for b in costs["data"] for r in b["results"]]
        assert cost["currency"] == "USD" and float(cost["amount"]) > 0  # cents, a decimal string
        assert cost["model"] == "claude-haiku-4-5" and cost["cost_type"] == "tokens"
        api_key = {"x-api-key": "sk-ant-a", "anthropic-version": "2023-06-01"}
        refused = httpx.get(
            f"{server.url}/v1/organizations/cost_report",
            params={"starting_at": start},
            headers=api_key,
        )
        assert refused.status_code == 401 and refused.json()["type"] == "error"


def test_organization_flag() -> None:
    from click.testing import CliRunner

    from emulator.cli import emulator_command
    from emulator.config import parse_organizations

    assert parse_organizations(["sk-b=org-b", " k = o "]) == {"sk-b": "org-b", "k": "o"}
    bad = CliRunner().invoke(emulator_command, ["--organization", "sk-b"])
    assert bad.exit_code == 2 and "must look like KEY=ORG" in bad.output


def test_workspace_flag() -> None:
    from click.testing import CliRunner

    from emulator.cli import emulator_command
    from emulator.config import parse_workspaces

    assert parse_workspaces(["sk-ant-b=wrkspc_b"]) == {"sk-ant-b": "wrkspc_b"}
    bad = CliRunner().invoke(emulator_command, ["--workspace", "sk-ant-b"])
    assert bad.exit_code == 2 and "must look like KEY=WORKSPACE" in bad.output
