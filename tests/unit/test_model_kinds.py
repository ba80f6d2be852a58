"""A model of the wrong kind, or a vector longer than the model makes, is refused before any
send: the provider's documented model families say which kind each model answers."""

import pytest

from maple_engine.errors import ConfigError
from maple_engine.inputs.preflight import check_declaration
from maple_engine.spec import JobSpec


def chat(model: str, provider: str = "openai") -> JobSpec:
    return JobSpec(name="j", prompt="About {title}", model=model, provider=provider)


def embed(model: str, provider: str = "openai", dimensions: int | None = None) -> JobSpec:
    spec = {"model": model, "provider": provider, "dimensions": dimensions}
    return JobSpec(name="j", kind="embedding", text="{title}", **spec)


@pytest.mark.parametrize("provider", ["openai", "openai-realtime", "emulator"])
def test_a_chat_job_on_an_embedding_model_is_refused_before_any_send(provider: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_declaration(chat("text-embedding-3-small", provider))
    assert str(raised.value) == (
        "--model text-embedding-3-small is an embedding model, and a chat job sends chat "
        "requests: give a chat model, or run `maple embed` for this model."
    )


def test_an_embedding_job_on_a_chat_model_names_an_embedding_model() -> None:
    with pytest.raises(
        ConfigError,
        match=r"gpt-4o-mini is a chat model.*give an embedding "
        r"model \(e\.g\. text-embedding-3-small\).*`maple enrich`",
    ):
        check_declaration(embed("gpt-4o-mini"))
    with pytest.raises(ConfigError, match=r"gemini-2\.5-flash is a chat model"):
        check_declaration(embed("gemini-2.5-flash", "gemini"))
    with pytest.raises(ConfigError, match=r"anthropic\.claude-3-haiku-20240307-v1:0 is a chat"):
        check_declaration(embed("anthropic.claude-3-haiku-20240307-v1:0", "bedrock"))


def test_dimensions_beyond_what_the_model_makes_are_refused() -> None:
    with pytest.raises(
        ConfigError,
        match=r"--dimensions 99,999 is more than "
        r"text-embedding-3-small makes \(at most 1,536 values\): give "
        r"--dimensions 1 to 1,536\.",
    ):
        check_declaration(embed("text-embedding-3-small", dimensions=99999))
    with pytest.raises(ConfigError, match="at most 768 values"):
        check_declaration(embed("text-embedding-004", "gemini", dimensions=1024))
    with pytest.raises(ConfigError, match="takes no --dimensions: drop --dimensions 256"):
        check_declaration(embed("text-embedding-ada-002", dimensions=256))
    check_declaration(embed("text-embedding-3-large", dimensions=3072))
    check_declaration(embed("gemini-embedding-001", "gemini-realtime", dimensions=3072))


def test_models_of_no_documented_family_are_not_checked() -> None:
    check_declaration(chat("my-finetune", "emulator"))
    check_declaration(embed("my-embedder", "openai-realtime", dimensions=99999))
    check_declaration(chat("claude-haiku-4-5", "anthropic"))  # Anthropic lists no families
