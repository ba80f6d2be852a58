"""The emulator's prompt caches through the official SDKs: usage fields as each provider names
them, the minimum prefix, organisations kept apart, batch lines in order, and the stats."""

import time

import anthropic
import httpx
import openai

from emulator.core.prompt_cache import PromptCache
from emulator.server import EmulatorServer
from emulator.testing import anthropic_client, openai_client

RULES = "Rule: answer with the brand only. " * 600  # ~5,100 tokens


def _cached_system(ttl: str | None = None) -> list[dict[str, object]]:
    control: dict[str, str] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    return [{"type": "text", "text": RULES, "cache_control": control}]


def _ask(client: anthropic.Anthropic, text: str, system: object) -> anthropic.types.Message:
    return client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=50,
        system=system,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": text}],
    )


def test_anthropic_writes_then_reads_the_marked_prefix(
    claude: anthropic.Anthropic, emulator: EmulatorServer
) -> None:
    first, second = _ask(claude, "a", _cached_system()), _ask(claude, "bb", _cached_system())
    prefix = first.usage.cache_creation_input_tokens
    assert prefix and prefix > 4096
    assert first.usage.cache_read_input_tokens == 0
    assert (second.usage.cache_read_input_tokens, second.usage.cache_creation_input_tokens) == (
        prefix,
        0,
    )
    # input_tokens counts only what was neither read nor written: the user message + framing
    assert second.usage.input_tokens == first.usage.input_tokens == 1 + 3 + 3
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == prefix
    stats = emulator.stats()
    assert (stats["cache_write_tokens"], stats["cache_read_tokens"]) == (prefix, prefix)


def test_anthropic_caches_nothing_unmarked_short_or_of_another_organisation(
    claude: anthropic.Anthropic, emulator: EmulatorServer
) -> None:
    plain = _ask(claude, "a", RULES)
    assert (plain.usage.cache_read_input_tokens, plain.usage.cache_creation_input_tokens) == (0, 0)
    short = [{"type": "text", "text": "be brief " * 100, "cache_control": {"type": "ephemeral"}}]
    assert _ask(claude, "a", short).usage.cache_creation_input_tokens == 0  # under 4,096
    _ask(claude, "a", _cached_system("1h"))
    with anthropic.Anthropic(base_url=emulator.url, api_key="other-org", max_retries=0) as other:
        theirs = _ask(other, "a", _cached_system("1h"))
    assert theirs.usage.cache_read_input_tokens == 0
    assert theirs.usage.cache_creation is not None
    assert theirs.usage.cache_creation.ephemeral_1h_input_tokens > 4096


def test_anthropic_batch_lines_read_what_earlier_lines_wrote(emulator: EmulatorServer) -> None:
    with anthropic_client(emulator) as client:
        requests = [
            {
                "custom_id": f"r{i}",
                "params": {
                    "model": "claude-haiku-4-5",
                    "max_tokens": 20,
                    "system": _cached_system("1h"),
                    "messages": [{"role": "user", "content": f"row {i}"}],
                },
            }
            for i in range(5)
        ]
        batch = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        while client.messages.batches.retrieve(batch.id).processing_status != "ended":
            time.sleep(0.05)
        usage = {}
        for item in client.messages.batches.results(batch.id):
            assert item.result.type == "succeeded"
            usage[item.custom_id] = item.result.message.usage
    assert usage["r0"].cache_creation_input_tokens > 4096
    assert all(
        usage[f"r{i}"].cache_read_input_tokens == usage["r0"].cache_creation_input_tokens
        for i in range(1, 5)
    )


def test_openai_reads_1024_plus_prefixes_in_128_token_steps(
    oai: openai.OpenAI, emulator: EmulatorServer
) -> None:
    def ask(system: str, key: str = "test-key") -> openai.types.CompletionUsage:
        with (
            openai_client(emulator)
            if key == "test-key"
            else openai.OpenAI(base_url=f"{emulator.url}/v1", api_key=key, max_retries=0) as client
        ):
            done = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "system", "content": system}, {"role": "user", "content": "x"}],
                prompt_cache_key="maple-job",
            )
        assert done.usage is not None
        return done.usage

    assert ask(RULES).prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    second = ask(RULES)
    cached = second.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
    assert cached and (cached - 1024) % 128 == 0 and second.prompt_tokens - 128 < cached
    assert ask(RULES, key="another-org").prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    short = "be brief " * 400  # ~900 tokens: under 1,024
    ask(short)
    assert ask(short).prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    stats = emulator.stats()
    assert (stats["cache_read_tokens"], stats["cache_write_tokens"]) == (cached, 0)


def test_a_prefix_expires_after_its_ttl() -> None:
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    key = ("anthropic", "org", "m", "digest")
    assert cache.use(key, 5000, 300).write == 5000
    now[0] = 299.0
    assert cache.use(key, 5000, 300).read == 5000  # a read refreshes the TTL
    now[0] = 598.0
    assert cache.use(key, 5000, 300).read == 5000
    now[0] = 899.0
    assert cache.use(key, 5000, 300).write == 5000


def test_gemini_caches_a_long_system_instruction_implicitly(emulator: EmulatorServer) -> None:
    def ask(model: str, key: str = "test-key") -> dict[str, int]:
        body = {
            "systemInstruction": {"parts": [{"text": RULES}]},
            "contents": [{"role": "user", "parts": [{"text": "oats"}]}],
        }
        url = f"{emulator.url}/v1beta/models/{model}:generateContent"
        answer = httpx.post(url, json=body, headers={"x-goog-api-key": key}, timeout=10)
        assert answer.status_code == 200, answer.text
        return dict(answer.json()["usageMetadata"])

    assert "cachedContentTokenCount" not in ask("gemini-2.5-flash")
    usage = ask("gemini-2.5-flash")
    assert 4096 < usage["cachedContentTokenCount"] < usage["promptTokenCount"]
    assert "cachedContentTokenCount" not in ask("gemini-2.5-flash", key="another-org")
    assert emulator.stats()["cache_write_tokens"] == 0  # implicit writes are free
