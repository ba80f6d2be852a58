"""The flex tier through the official OpenAI SDK and raw Gemini calls: slower answers that echo
the tier, 429s at --flex-unavailable's rate (not billed), and the flex stats."""

import httpx
import openai
import pytest

from emulator.testing import MakeEmulator, openai_client


def test_openai_flex_answers_echo_the_tier_and_unavailable_is_a_429(
    make_emulator: MakeEmulator,
) -> None:
    with make_emulator(flex_unavailable=0.5, seed=1) as server, openai_client(server) as client:
        tiers, refused = [], 0
        for i in range(40):
            try:
                done = client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": f"row {i}"}],
                    service_tier="flex",
                )
                tiers.append(done.service_tier)
            except openai.RateLimitError as exc:
                refused += 1
                assert exc.code == "resource_unavailable"
                assert exc.response.headers["retry-after-ms"] == "100"
        standard = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "now"}]
        )
        stats = server.stats()
    assert set(tiers) == {"flex"} and standard.service_tier == "default"
    assert 5 < refused < 35
    assert (stats["flex_requests"], stats["flex_429"]) == (40, refused)
    assert stats["requests_billed"] == len(tiers) + 1  # a flex 429 is not billed


def test_gemini_flex_unavailable_is_resource_exhausted(make_emulator: MakeEmulator) -> None:
    with make_emulator(flex_unavailable=1.0) as server:
        body = {"contents": [{"parts": [{"text": "hi"}]}], "serviceTier": "flex"}
        url = f"{server.url}/v1beta/models/gemini-2.5-flash:generateContent"
        answer = httpx.post(url, json=body, headers={"x-goog-api-key": "k"}, timeout=10)
        assert answer.status_code == 429
        assert answer.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
        assert server.stats()["flex_429"] == 1


def test_flex_unavailable_must_be_a_rate(make_emulator: MakeEmulator) -> None:
    with pytest.raises(ValueError, match="flex_unavailable"):
        make_emulator(flex_unavailable=1.5)
