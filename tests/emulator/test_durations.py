"""``--batch-seconds-spread`` and ``--stall``: batch durations drawn log-normal around
``--batch-seconds``, some batches stalled far longer; seen through the OpenAI SDK and the CLI."""

import statistics
import time

import pytest
from click.testing import CliRunner

from emulator.cli import emulator_command
from emulator.config import EmulatorConfig
from emulator.durations import BatchDurations
from emulator.state import Stats
from emulator.testing import MakeEmulator, chat_line, jsonl, openai_client


def test_spread_is_log_normal_around_the_median_and_stalls_are_counted() -> None:
    stats = Stats()
    config = EmulatorConfig(batch_seconds=10, batch_seconds_spread=0.5, stall=0.1, seed=7)
    durations = BatchDurations(config, stats)
    draws = [durations.draw() for _ in range(4000)]
    stalled = stats.snapshot()["batches_stalled"]
    assert 300 <= stalled <= 500  # 10% of 4000
    regular = sorted(d for d in draws if d < 10 * 20)
    assert statistics.median(regular) == pytest.approx(10, rel=0.1)
    assert max(draws) > 10 * 50 * 0.2 and min(draws) < 10
    same = BatchDurations(config, Stats())
    assert [same.draw() for _ in range(50)] == draws[:50]  # seeded: a run repeats
    plain = BatchDurations(EmulatorConfig(batch_seconds=3), stats)
    assert {plain.draw() for _ in range(20)} == {3}


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
