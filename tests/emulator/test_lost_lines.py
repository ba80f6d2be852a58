"""``--drop-lines`` and ``--duplicate-lines``: a completed batch whose output lacks or repeats
answered lines, as providers have been seen to return, billed as a provider bills requests."""

import time
from collections import Counter

import openai
import pytest
from click.testing import CliRunner
from openai.types import Batch

from emulator.cli import emulator_command
from emulator.core.line_fates import LineFates
from emulator.testing import (
    MakeEmulator,
    anthropic_client,
    chat_line,
    jsonl,
    message_request,
    openai_client,
    parse_jsonl,
)

LINES = 400


def _run(client: openai.OpenAI, requests: list[dict[str, object]]) -> tuple[Batch, list[str]]:
    """A batch of ``requests`` run to its end: the batch and its output's ids."""
    file_id = client.files.create(file=("in.jsonl", jsonl(requests)), purpose="batch").id
    batch = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    batch = client.batches.retrieve(batch.id)
    assert batch.output_file_id is not None
    output = parse_jsonl(client.files.content(batch.output_file_id).content)
    return batch, [str(line["custom_id"]) for line in output]


def _lines(count: int) -> list[dict[str, object]]:
    return [chat_line(f"r{i}", f"thing {i}") for i in range(count)]


def test_a_completed_batch_drops_a_share_of_lines_and_bills_none_of_them(
    make_emulator: MakeEmulator,
) -> None:
    with make_emulator(drop_lines=0.1, control_fail=0.0) as server, openai_client(server) as oai:
        batch, ids = _run(oai, _lines(LINES))
        stats = server.stats()
    dropped = stats["lines_dropped"]
    assert 20 <= dropped <= 60, dropped  # about a tenth of 400
    assert len(ids) == len(set(ids)) == LINES - dropped
    # the batch says every request completed: the loss is silent, as reported of real batches
    assert batch.status == "completed" and batch.request_counts is not None
    counts = batch.request_counts
    assert (counts.completed, counts.failed, counts.total) == (LINES, 0, LINES)
    assert batch.error_file_id is None
    assert stats["requests_billed"] == LINES - dropped


def test_a_batch_writes_a_share_of_lines_twice_and_bills_each_once(
    make_emulator: MakeEmulator,
) -> None:
    with make_emulator(duplicate_lines=0.1, control_fail=0.0) as server:
        with openai_client(server) as oai:
            _, ids = _run(oai, _lines(LINES))
        stats = server.stats()
    repeated = Counter(ids)
    twice = [custom_id for custom_id, seen in repeated.items() if seen == 2]
    assert set(repeated) == {f"r{i}" for i in range(LINES)}
    assert max(repeated.values()) == 2 and len(ids) == LINES + len(twice)
    assert len(twice) == stats["lines_duplicated"] and 20 <= len(twice) <= 60
    assert stats["requests_billed"] == LINES and stats["bodies_billed_twice"] == 0


def test_a_line_lost_once_is_answered_when_sent_again(make_emulator: MakeEmulator) -> None:
    """Each batch draws its lost lines afresh: a resend of the lost ones gets them answered."""
    with make_emulator(drop_lines=0.5, control_fail=0.0) as server, openai_client(server) as oai:
        _, first = _run(oai, _lines(40))
        lost = sorted({f"r{i}" for i in range(40)} - set(first))
        _, second = _run(
            oai, [chat_line(custom_id, f"thing {custom_id[1:]}") for custom_id in lost]
        )
    assert lost and set(second) < set(lost)
    assert len(second) > 0


def test_a_cancelled_batch_lists_its_lost_lines_as_cancelled(make_emulator: MakeEmulator) -> None:
    """Lines lost by a batch that is then cancelled before they would have run come back as
    ``batch_cancelled`` in its error file; those before the cancel are simply absent."""
    with (
        make_emulator(batch_seconds=2.0, drop_lines=0.2, control_fail=0.0) as server,
        openai_client(server) as oai,
    ):
        file_id = oai.files.create(file=("in.jsonl", jsonl(_lines(200))), purpose="batch").id
        batch = oai.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        time.sleep(1.0)  # about half run
        oai.batches.retrieve(batch.id)
        oai.batches.cancel(batch.id)
        deadline = time.monotonic() + 10
        while (batch := oai.batches.retrieve(batch.id)).status != "cancelled":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert batch.output_file_id is not None and batch.error_file_id is not None
        out = parse_jsonl(oai.files.content(batch.output_file_id).content)
        err = parse_jsonl(oai.files.content(batch.error_file_id).content)
        stats = server.stats()
    listed = [line["custom_id"] for line in out + err]
    assert len(listed) == len(set(listed))  # no request listed twice
    assert stats["lines_dropped"] > 0
    assert len(listed) + stats["lines_dropped"] == 200
    assert stats["requests_billed"] == len(out)


@pytest.mark.parametrize("flag", ["--drop-lines", "--duplicate-lines"])
def test_a_share_outside_zero_to_one_is_refused(flag: str) -> None:
    result = CliRunner().invoke(emulator_command, [flag, "1.5"])
    assert result.exit_code == 2 and flag in result.output


def test_an_anthropic_batch_that_ended_loses_and_repeats_lines_as_told(
    make_emulator: MakeEmulator,
) -> None:
    with (
        make_emulator(drop_lines=0.1, duplicate_lines=0.1, control_fail=0.0) as server,
        anthropic_client(server) as claude,
    ):
        requests = [message_request(f"r{i}", f"thing {i}") for i in range(LINES)]
        batch = claude.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        ended = claude.messages.batches.retrieve(batch.id)
        ids = [r.custom_id for r in claude.messages.batches.results(batch.id)]
        stats = server.stats()
    dropped, repeated = stats["lines_dropped"], stats["lines_duplicated"]
    assert ended.processing_status == "ended" and ended.request_counts.succeeded == LINES
    assert 20 <= dropped <= 60 and 20 <= repeated <= 60
    assert len(ids) == LINES - dropped + repeated and len(set(ids)) == LINES - dropped
    assert stats["requests_billed"] == LINES - dropped and stats["bodies_billed_twice"] == 0


@pytest.mark.parametrize("batch", [f"b{n}" for n in range(50)])
def test_every_small_batch_loses_and_repeats_its_share_whatever_its_id(batch: str) -> None:
    """A share is spread over a batch's lines, so a test's small batches lose and repeat
    lines whatever ids the batches drew (ids follow every batch the emulator made before)."""
    six, ten = LineFates(5, batch, 0.2, 0.2), LineFates(5, batch, 0.2, 0.2)
    lost_of_six = Counter(six.copies() for _ in range(6))[0]
    assert lost_of_six in (1, 2)  # 6 x 0.2 lines, rounded either way
    of_ten = Counter(ten.copies() for _ in range(10))
    assert of_ten[0] >= 1 and of_ten[2] >= 1, of_ten
