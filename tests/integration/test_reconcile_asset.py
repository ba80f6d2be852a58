"""``maple_reconcile`` through Dagster's machinery: an OpenAI enrichment billed through the
emulator, then a run over yesterday and today with its ``within_tolerance`` check; spend from
another key of the organisation makes the check fail naming the model; without an admin key
a run skips the asset, naming the variable, and the code location does not automate it."""

from datetime import UTC, datetime
from typing import Any

import dagster as dg
import httpx
import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_assets.definitions import defs
from maple_assets.factory import enrichment
from maple_assets.graph.reconcile import CHECK, RECONCILE, reconcile_asset
from maple_assets.wiring import billing_resource, maple_resources
from maple_engine.errors import ConfigError
from maple_engine.settings import Settings
from tests.integration.test_graph import run_graph

OPENAI = "openai"


def _check(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == CHECK
    return evaluation


def test_the_days_reconciliation_and_its_check(
    tmp_path: Any, emulator_server: EmulatorServer, tricky_table: pl.DataFrame, monkeypatch: Any
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{emulator_server.url}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-maple")
    monkeypatch.setenv("OPENAI_ADMIN_KEY", "sk-admin-dagster")

    @dg.asset
    def items() -> pl.DataFrame:
        return tricky_table

    en = enrichment(
        name="billed_items", source=items, prompt="{title}", model="gpt-4o-mini",
        provider=OPENAI, team="bakery", max_requests_per_batch=5,
    )  # fmt: skip
    resources = maple_resources([en], storage_root=str(tmp_path / "store"))
    resources["maple_billing"] = billing_resource(OPENAI)
    asset = reconcile_asset()
    today = str(datetime.now(UTC).date())
    with dg.instance_for_test() as instance:
        run_graph(en, [items], resources, instance)
        calm = dg.materialize([asset], instance=instance, resources=resources)
        assert calm.success and _check(calm).passed
        [mat] = calm.asset_materializations_for_node("maple_reconcile")
        assert mat.metadata["models"] == dg.IntMetadataValue(1)
        ledger, provider = (float(mat.metadata[f"{s}_usd"].value) for s in ("ledger", "provider"))  # type: ignore[arg-type]
        assert ledger > 0 and provider == pytest.approx(ledger, rel=0.01)
        assert "| gpt-4o-mini |" in str(mat.metadata["table"].value)

        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 200_000}]}
        headers = {"Authorization": "Bearer sk-colleague"}
        sent = httpx.post(f"{emulator_server.url}/v1/chat/completions", json=body, headers=headers)
        assert sent.status_code == 200
        drift = dg.materialize([asset], instance=instance, resources=resources)
        evaluation = _check(drift)
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
        lines = str(evaluation.metadata["lines"].value)
        assert lines.startswith(f"drift: {today} gpt-4o-mini: ledger $")


def test_a_missing_admin_key_skips_the_asset_naming_the_variable(
    monkeypatch: Any, tmp_path: Any
) -> None:
    """Not a red failure (before: the sample's nightly run failed with a stack trace)."""
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    resources = maple_resources([], storage_root=str(tmp_path))
    resources["maple_billing"] = billing_resource(OPENAI, Settings.load())
    with dg.instance_for_test() as instance:
        result = dg.materialize([reconcile_asset()], resources=resources, instance=instance)
        logs = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert result.success
    assert result.asset_materializations_for_node("maple_reconcile") == []
    assert result.get_asset_check_evaluations() == []  # not evaluated, not passed
    assert any(m.startswith("OPENAI_ADMIN_KEY is not set") for m in logs), logs
    with pytest.raises(ConfigError, match="OPENAI_ADMIN_KEY is not set"):  # `maple reconcile`
        today = datetime.now(UTC).date()
        resources["maple_billing"].reconcile(None, (today, today))


def test_the_code_location_has_the_nightly_asset_and_check() -> None:
    node = defs.resolve_asset_graph().get(RECONCILE)
    assert node.partitions_def is None  # the global "Materialize all" picks no days
    assert dg.AssetCheckKey(RECONCILE, CHECK) in defs.resolve_asset_graph().asset_check_keys
    check = defs.resolve_asset_graph().get_check_spec(dg.AssetCheckKey(RECONCILE, CHECK))
    assert "drifted" in (check.description or "")
    # automated only with the key: the sample without one schedules no nightly failure
    automated = reconcile_asset(automate=True).specs_by_key[RECONCILE].automation_condition
    assert automated is not None
    assert reconcile_asset(automate=False).specs_by_key[RECONCILE].automation_condition is None
