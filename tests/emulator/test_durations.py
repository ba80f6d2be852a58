"""``--batch-seconds-spread`` and ``--stall``: batch durations drawn log-normal around
``--batch-seconds``, some batches stalled far longer; seen through the OpenAI SDK and the CLI."""

import statistics
import time
from typing import Any

import pytest
from click.testing import CliRunner

from emulator.cli import emulator_command
from emulator.config import EmulatorConfig
from emulator.core.durations import BatchDurations
from emulator.core.state import Stats
from emulator.testing import MakeEmulator, anthropic_client, chat_line, jsonl, openai_client


def test_spread_is_log_normal_around_the_median_and_stalls_are_counted() -> None:
    stats = Stats()
    config = EmulatorConfig(batch_seconds=10, batch_seconds_spread=0.5, stall=0.1, seed=7)
    durations = BatchDurations(config, stats)
    draws = [durations.draw(0) for _ in range(4000)]
    stalled = stats.snapshot()["batches_stalled"]
    assert 300 <= stalled <= 500  # 10% of 4000
    regular = sorted(d for d in draws if d < 10 * 20)
    assert statistics.median(regular) == pytest.approx(10, rel=0.1)
    assert max(draws) > 10 * 50 * 0.2 and min(draws) < 10
    same = BatchDurations(config, Stats())
    assert [same.draw(0) for _ in range(50)] == draws[:50]  # seeded: a run repeats
    plain = BatchDurations(EmulatorConfig(batch_seconds=3), stats)
    assert {plain.draw(0) for _ in range(20)} == {3}


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--batch-seconds-spread", "-1"], "--batch-seconds-spread"),
        (["--stall", "1.5"], "--stall"),
    ],
)
def test_bad_values_are_usage_errors(flags: list[str], problem: str) -> None:
    result = CliRunner().invoke(emulator_command, flags)
    assert result.exit_code == 2 and problem in result.output


def test_a_stalled_batch_stays_in_progress_past_its_duration(make_emulator: MakeEmulator) -> None:
    with make_emulator(batch_seconds=0.3, stall=1.0) as server, openai_client(server) as client:
        file_id = client.files.create(
            file=("input.jsonl", jsonl([chat_line("a", "x")])), purpose="batch"
        ).id
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        time.sleep(2.0)  # 0.3 s drawn, 15 s stalled: validating for its first 1.5 s
        assert client.batches.retrieve(batch.id).status == "in_progress"
        assert server.stats()["batches_stalled"] == 1


def test_a_batch_takes_longer_per_thousand_requests() -> None:
    config = EmulatorConfig(batch_seconds=2, batch_seconds_per_1k=4)
    durations = BatchDurations(config, Stats())
    assert [durations.draw(n) for n in (0, 500, 1000, 50_000)] == [2, 4, 6, 202]


def test_per_size_turnaround_through_the_sdks(make_emulator: MakeEmulator) -> None:
    """A 400-request batch ends about 2 s after a 4-request one (0.2 s + 5 s per 1,000), on the
    OpenAI-shaped and the Anthropic batch APIs alike."""
    with make_emulator(batch_seconds=0.2, batch_seconds_per_1k=5) as server:
        with openai_client(server) as client:
            ids = []
            for n in (4, 400):
                lines = [chat_line(f"r{i}", "x") for i in range(n)]
                upload = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
                ids.append(
                    client.batches.create(
                        input_file_id=upload.id,
                        endpoint="/v1/chat/completions",
                        completion_window="24h",
                    ).id
                )
            time.sleep(1.0)
            small, big = (client.batches.retrieve(i).status for i in ids)
            assert (small, big) == ("completed", "in_progress")
        with anthropic_client(server) as claude:
            requests: list[Any] = [
                {
                    "custom_id": f"r{i}",
                    "params": {
                        "model": "claude-haiku-4-5",
                        "max_tokens": 8,
                        "messages": [{"role": "user", "content": "x"}],
                    },
                }
                for i in range(400)
            ]
            batch = claude.messages.batches.create(requests=requests)
            time.sleep(1.0)
            assert claude.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    result = CliRunner().invoke(emulator_command, ["--batch-seconds-per-1k", "-1"])
    assert result.exit_code == 2 and "--batch-seconds-per-1k" in result.output
