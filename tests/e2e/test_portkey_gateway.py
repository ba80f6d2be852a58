"""Portkey's gateway, the real program (``@portkey-ai/gateway`` pinned in ``.ci/run``), between
``maple`` and the emulator, routed per request by ``--header 'x-portkey-provider: openai'
--header 'x-portkey-custom-host: EMULATOR/v1'``. A real-time chat job runs to its end, every row
billed once and booked. Version 1.15.2 on Node 20 answers two routes 500 "Something went wrong"
after the emulator answered (its log: ``TypeError: immutable``, appending a header to the
upstream's answer; a bare upstream gets the same), and these tests hold what the user gets:

- embeddings (``POST /v1/embeddings``): the gateway marks its 500 as its own exception
  (``x-portkey-gateway-exception: true``), so the rows end failed, not resent, with one line
  naming the gateway, its mark and the fix: each text billed once, none twice;
- a batch's results (``GET /v1/files/{id}/content``): the upload, create and polls pass, the
  download (a GET, free: retried) ends the job in one line naming the answer and the gateway's
  mark, nothing billed twice, and the same command without the gateway (the emulator's own
  URL) adopts the batch, sending nothing again.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import maple
from tests.e2e.gateway_programs import portkey_gateway, portkey_headers
from tests.e2e.hostile import outcome_line, table_job

pytestmark = pytest.mark.slow  # starts Portkey's gateway (about 1 s); the batch case ~30 s
ROWS = 12
KEY = "sk-emulator"  # Portkey passes the caller's key on to the provider


@pytest.fixture(scope="module")
def through(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmulatorServer, str]]:
    """The emulator, and the base URL of Portkey's gateway in front of it."""
    config = EmulatorConfig(batch_seconds=0.2, control_fail=0)
    with (
        EmulatorServer(config) as server,
        portkey_gateway(tmp_path_factory.mktemp("portkey")) as base,
    ):
        yield server, base


def job(tmp_path: Path, command: str, provider: str, base: str) -> list[str]:
    return table_job(tmp_path, command, provider, ROWS, "--poll-interval", "0.1",
                     "--base-url", base)  # fmt: skip


def booked(tmp_path: Path) -> list[dict[str, object]]:
    shown = maple(
        "costs", "--storage", str(tmp_path / "store"), "--by", "job", "--format", "json", clean=True
    )
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout))


def test_a_real_time_chat_job_through_portkey_runs_to_its_end_billed_once_and_booked(
    through: tuple[EmulatorServer, str], tmp_path: Path
) -> None:
    server, base = through
    server.reset()
    args = [*job(tmp_path, "enrich", "openai-realtime", base), *portkey_headers(server.url)]
    done = maple(*args, clean=True, OPENAI_API_KEY=KEY)
    stats = server.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["realtime_requests"] == ROWS and stats["batches_created"] == 0
    [row] = booked(tmp_path)
    assert row["job"] == "hostile" and row["requests"] == ROWS


def test_embeddings_through_portkey_end_failed_naming_its_exception_no_text_billed_twice(
    through: tuple[EmulatorServer, str], tmp_path: Path
) -> None:
    server, base = through
    server.reset()
    args = [*job(tmp_path, "embed", "openai-realtime", base), *portkey_headers(server.url)]
    done = maple(*args, clean=True, OPENAI_API_KEY=KEY)
    stats = server.stats()
    assert done.returncode == 3, done.stderr  # rows failed
    assert "Traceback" not in done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["failed"] * ROWS
    [error] = set(out["llm_error"].to_list())
    assert error.startswith("not resent: 500: Something went wrong. Portkey's gateway marked"), (
        error
    )
    assert "(x-portkey-gateway-exception: true)" in error
    assert "call the provider directly" in error
    assert stats["requests_billed"] == ROWS  # the emulator answered: billed, once
    assert stats["bodies_billed_twice"] == 0


def test_a_batch_job_through_portkey_ends_in_one_line_at_its_download_and_is_adopted_after(
    through: tuple[EmulatorServer, str], tmp_path: Path
) -> None:
    server, base = through
    server.reset()
    args = job(tmp_path, "enrich", "openai-compatible", base)
    broken = maple(*args, *portkey_headers(server.url), clean=True, MAPLE_API_KEY=KEY)
    before = server.stats()
    # the same command without the gateway: the emulator's URL (Portkey kept the batch's ids)
    args[args.index("--base-url") + 1] = f"{server.url}/v1"
    direct = maple(*args, clean=True, MAPLE_API_KEY=KEY)
    after = server.stats()
    assert broken.returncode == 4, broken.stderr  # stopped: nothing lost, the rerun adopts
    line = outcome_line(broken.stderr)
    assert line.startswith("stopped: download output_file_id of batch "), line
    assert "/content answered 500 the same way 8 times in a row: Something went wrong." in line
    assert "Portkey's gateway marked this 500 as its own exception" in line
    assert "rerun the same command" in line
    # uploaded, created and polled through the gateway: billed once, not sent again
    assert (before["batches_created"], before["requests_billed"]) == (1, ROWS)
    assert before["bodies_billed_twice"] == 0
    assert direct.returncode == 0, direct.stderr
    assert after["batches_created"] == 1 and after["requests_billed"] == ROWS
    assert after["bodies_billed_twice"] == 0
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    [row] = booked(tmp_path)
    assert row["requests"] == ROWS
