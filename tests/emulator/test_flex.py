"""The flex tier through the official OpenAI SDK and raw Gemini calls: slower answers that echo
the tier, 429s at --flex-unavailable's rate (not billed), and the flex stats."""

import time

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


def test_openai_priority_answers_faster_echo_the_tier_and_cost_twice(
    make_emulator: MakeEmulator,
) -> None:
    start = int(time.time()) - 3600
    admin = {"Authorization": "Bearer sk-admin-p"}
    with (
        make_emulator(realtime_latency_s=(0.4, 0.4), priority_speedup=4.0) as server,
        openai_client(server) as client,
    ):
        ask = [{"role": "user", "content": "the same words " * 20}]
        began = time.monotonic()
        standard = client.chat.completions.create(model="gpt-4o-mini", messages=ask)
        slow = time.monotonic() - began
        began = time.monotonic()
        priority = client.chat.completions.create(
            model="gpt-4o-mini", messages=ask, service_tier="priority"
        )
        fast = time.monotonic() - began
        stats = server.stats()
        usage = httpx.get(
            f"{server.url}/v1/organization/usage/completions",
            params={"start_time": start, "group_by": ["model", "service_tier"]},
            headers=admin,
        ).json()
        costs = httpx.get(
            f"{server.url}/v1/organization/costs",
            params={"start_time": start, "group_by": "line_item"},
            headers=admin,
        ).json()
    assert (standard.service_tier, priority.service_tier) == ("default", "priority")
    assert slow >= 0.4 and fast < 0.3  # 0.4 s / 4
    assert stats["priority_requests"] == 1 and stats["requests_billed"] == 2
    results = [r for b in usage["data"] for r in b["results"]]
    assert sorted(r["service_tier"] for r in results) == ["default", "priority"]
    total = sum(r["amount"]["value"] for b in costs["data"] for r in b["results"])
    one = standard.usage
    assert one is not None and priority.usage is not None
    assert priority.usage.prompt_tokens == one.prompt_tokens
    # one standard and one priority request of the same tokens: 1 + 2 times the standard price
    rate = 0.15 * one.prompt_tokens / 1e6 + 0.6 * one.completion_tokens / 1e6
    assert total == pytest.approx(3 * rate, rel=1e-6)
