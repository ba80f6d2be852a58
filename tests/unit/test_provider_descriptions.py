"""What ``maple providers`` says of each ``--provider`` name (`registry.describe`), and
docs/providers.md kept equal to what it generates."""

from pathlib import Path

import pytest

from maple_assets.cli.providers import REGENERATE, markdown
from maple_engine.ledger.pricing import DEFAULT_BATCH_DISCOUNT
from maple_engine.providers.base import TYPICAL_BATCH_PRICE_SHARE
from maple_engine.providers.registry import (
    LANES,
    PROVIDERS,
    build_provider,
    capabilities,
    describe,
    describe_one,
)

ROOT = Path(__file__).resolve().parents[2]
KEYS = [
    "name",
    "family",
    "kinds",
    "files",
    "lanes",
    "batch_discount",
    "max_requests_per_batch",
    "max_batch_bytes",
    "results_retention_s",
    "env",
]


def test_every_name_is_described_once_in_registry_order() -> None:
    assert tuple(info.name for info in describe()) == PROVIDERS


@pytest.mark.parametrize("name", PROVIDERS)
def test_the_json_object_has_exactly_the_contracts_keys(name: str) -> None:
    as_json = describe_one(name).as_json()
    assert list(as_json) == KEYS
    assert set(as_json["kinds"]) <= {"chat", "embeddings"} and as_json["kinds"]
    assert as_json["lanes"] and set(as_json["lanes"]) <= set(LANES)
    assert set(as_json["files"]) <= {"pdf", "image", "audio"}
    assert bool(as_json["files"]) == (capabilities(name).files is not None)
    assert all(isinstance(as_json[key], list) for key in ("kinds", "files", "lanes", "env"))


def test_openai_reaches_every_lane_and_its_tiers_one_each() -> None:
    assert describe_one("openai").lanes == ("batch", "realtime", "flex", "priority")
    assert describe_one("openai-flex").lanes == ("flex",)
    assert describe_one("openai-realtime").lanes == ("realtime",)
    assert describe_one("openai-priority").lanes == ("priority",)
    assert describe_one("gemini").lanes == ("batch", "realtime", "flex", "priority")
    assert describe_one("gemini-priority").lanes == ("priority",)
    assert describe_one("bedrock").lanes == ("batch",)


def test_batch_discount_is_what_comes_off_the_real_time_price() -> None:
    assert describe_one("openai").batch_discount == 0.5
    assert describe_one("groq").batch_discount == 0.5  # its batch costs half of real time
    assert describe_one("openai-flex").batch_discount == 0.5  # flex: billed at batch prices
    assert describe_one("openai-realtime").batch_discount is None
    assert describe_one("openai-priority").batch_discount is None
    assert TYPICAL_BATCH_PRICE_SHARE == DEFAULT_BATCH_DISCOUNT  # the ledger prices the same


def test_results_retention_where_the_provider_documents_one() -> None:
    assert describe_one("mistral").results_retention_s == 86_400
    assert describe_one("openai").results_retention_s == 30 * 86_400
    assert describe_one("anthropic").results_retention_s == 29 * 86_400
    for name in ("emulator", "azure-openai", "gemini", "openai-realtime"):
        assert describe_one(name).results_retention_s is None, name


def test_family_and_variables() -> None:
    azure = describe_one("azure-openai")
    assert azure.family == "azure-openai"
    assert azure.env == (
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "AZURE_OPENAI_API_VERSION",
    )
    assert describe_one("openai").env == ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY")
    assert "ANTHROPIC_VERSION" in describe_one("anthropic").env
    bedrock = describe_one("bedrock")
    assert bedrock.family == "bedrock" and bedrock.env[0] == "MAPLE_BEDROCK_ROLE_ARN"
    assert describe_one("emulator").env == ("MAPLE_EMULATOR_URL",)
    assert describe_one("openai-server").family == "openai-compatible"
    assert describe_one("groq-realtime").family == "groq"


def test_real_time_names_show_their_shard_attempt_limits() -> None:
    info, caps = describe_one("openai-realtime"), capabilities("openai-realtime")
    assert (info.max_requests_per_batch, info.max_batch_bytes) == (
        caps.limits.max_requests,
        caps.limits.max_bytes,
    )


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_late_lane_builds_from_its_batch_providers_settings(
    name: str, tmp_path: Path
) -> None:
    """A lane listed through a twin is one a deadline can build (the twin takes the batch
    provider's base URL, key and version)."""
    caps = capabilities(name)
    if caps.mode != "batch" or caps.runs_on_emulator:
        return
    batch = build_provider(name, storage_root=str(tmp_path))
    for twin in (caps.realtime_twin, caps.flex_twin, caps.priority_twin):
        if twin is not None:
            build_provider(twin, storage_root=str(tmp_path), **batch.twin_settings())


def test_docs_providers_md_is_what_the_command_generates() -> None:
    committed = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    assert committed == markdown(describe()), f"docs/providers.md is stale: run {REGENERATE}"
