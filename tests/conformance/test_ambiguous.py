"""The promise every batch provider keeps when the world is ambiguous:

f. a create whose answer is lost is looked up, never repeated blind: behind a gateway that
   passes every POST on (the provider makes and bills the upload or the batch) and then answers
   500, the job finds what each create made and runs to its end; each file is uploaded once,
   each batch created once, each row billed once; no create is sent twice, except one
   carrying an idempotency key (Bedrock's ``clientRequestToken``), which makes nothing new.

A real-time name is not held to it here: its requests are rows, whose 500s are retried by class
and bounded (``tests/e2e/test_hostile_retries.py``).
"""

from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.server import EmulatorServer
from tests.conformance.cases import CASES, Case
from tests.conformance.jobs import is_batch, job_args, ok, output, run, with_known_failure
from tests.e2e.gateway import Gateway, gateway


@pytest.fixture
def lossy(server: EmulatorServer) -> Iterator[tuple[Gateway, str]]:
    """A gateway before the module's emulator that answers every POST 500 once the emulator
    has answered it."""
    with gateway(server.url, "500-after-billing") as (front, url):
        yield front, url


#: names that create through OpenAI's batch provider as `openai` does (the long pass holds them)
SAME_CREATE_AS_OPENAI = frozenset({"emulator", "openai-compatible", "bedrock-openai"})


def lost_create_cases() -> list[object]:
    """Every batch name; in the long pass those whose lookups wait out their client's own
    retries (Bedrock's boto3, Anthropic's backoff: tens of seconds) and those creating as
    `openai` does."""
    params = []
    for case in CASES:
        if not is_batch(case):
            continue
        slow = case.keyed_creates or "lost_create" in case.known_failures
        slow = slow or case.provider in SAME_CREATE_AS_OPENAI
        param = with_known_failure(case, "lost_create", cheap=not slow)
        params.append(pytest.param(*param.values, id=param.id, marks=[*param.marks, *(
            [pytest.mark.slow] if slow else []
        )]))  # fmt: skip
    return params


@pytest.mark.parametrize("case", lost_create_cases())
def test_a_create_whose_answer_is_lost_is_looked_up_not_repeated(
    case: Case, server: EmulatorServer, lossy: tuple[Gateway, str], s3_url: str, tmp_path: Path
) -> None:
    front, url = lossy
    done = run(case, url, s3_url, *job_args(case, tmp_path))
    ok(done)
    assert output(tmp_path)["llm_status"].to_list() == ["succeeded"] * case.rows
    stats = server.stats()
    assert stats["batches_created"] == case.batches, stats
    assert stats["files_uploaded"] <= case.batches, stats  # inline requests upload none
    assert stats["requests_billed"] == case.rows and stats["bodies_billed_twice"] == 0, stats
    if not case.keyed_creates:
        assert max(front.posted.values()) == 1  # no POST body went out twice
    assert "not sent again" in done.stderr  # the lookup says what it found
