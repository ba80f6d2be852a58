"""Bedrock's Runtime OpenAI API: the base URL of the region, the Bedrock API key's variable, the
batch's headers and where its results are, and the setups refused before anything is sent."""

import pytest

from maple_engine.errors import ConfigError
from maple_engine.providers.bedrock_openai import wire
from maple_engine.providers.registry import build_provider, capabilities

ROLE = "arn:aws:iam::123456789012:role/batch"


def test_the_base_url_is_the_regions_runtime_endpoint_with_its_openai_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    batch = {"role_arn": ROLE}
    for name, extra in (("bedrock-openai", batch), ("bedrock-openai-realtime", {})):
        provider = build_provider(name, api_key="k", storage_root="s3://b/p", **extra)
        assert provider.resolved_base_url() == (
            "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1"
        )
        assert capabilities(name).variable("api_key") == "AWS_BEARER_TOKEN_BEDROCK"
        assert capabilities(name).variable("base_url") == "BEDROCK_OPENAI_BASE_URL"


def test_without_a_region_or_base_url_the_line_names_both_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in wire.REGION_ENVS:
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match=r"export AWS_REGION .* or BEDROCK_OPENAI_BASE_URL"):
        wire.runtime_url(None)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"storage_root": ".maple", "role_arn": ROLE}, "needs an S3 storage root"),
        ({"storage_root": "s3://b/p"}, "MAPLE_BEDROCK_ROLE_ARN is not set"),
        ({"storage_root": "s3://b/p", "role_arn": ROLE, "api_key": None},
         "AWS_BEARER_TOKEN_BEDROCK is not set"),
    ],
)  # fmt: skip
def test_a_missing_setting_is_refused_naming_it(fields: dict[str, object], says: str) -> None:
    provider = build_provider("bedrock-openai", **{"api_key": "k", **fields})
    with pytest.raises(ConfigError, match=says):
        provider.check_credentials()


def test_results_are_read_beside_the_input_in_the_batchs_folder() -> None:
    assert wire.result_uris("s3://b/j/bedrock-openai/input/s0-1-ab/s0-1.jsonl", "batch_9") == (
        "s3://b/j/bedrock-openai/input/s0-1-ab/batch_9/s0-1.jsonl.out",
        "s3://b/j/bedrock-openai/input/s0-1-ab/batch_9/s0-1.jsonl.err",
    )
