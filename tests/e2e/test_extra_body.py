"""``--extra-body KEY=JSON``: the fields an OpenAI-compatible gateway wants in the batch
control calls (LiteLLM routes by ``custom_llm_provider``) reach it in the batch create's JSON
body and the upload's form, on OpenAI's and Azure's batch APIs alike, and their values, which
may be secrets, appear nowhere: not on stderr or stdout, not in a file under the storage root.
The emulator plays the gateway (``--require-body-field``): without the field the job is exit 2
with the gateway's own message in one line, nothing uploaded. A malformed field, or one given
to a provider whose calls take none, is one line and exit 2 before any call."""

from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.hostile import maple_at, one_line, table_job

ROWS = 8
FIELD = "custom_llm_provider"
SECRET = "gw-body-secret-5d2a7e"
GIVEN = ("--extra-body", f'{FIELD}="azure"', "--extra-body", f'gateway_token="{SECRET}"')
GATEWAY_SAYS = f"The {FIELD} field is required in the request body"


def files_holding(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.parametrize(
    "provider", ["openai", pytest.param("azure-openai", marks=pytest.mark.slow)]
)
def test_the_fields_reach_the_gateway_on_the_create_and_the_upload(
    tmp_path: Path, provider: str
) -> None:
    config = EmulatorConfig(batch_seconds=0, control_fail=0, required_body_fields=(FIELD,))
    args = table_job(tmp_path, "enrich", provider, ROWS, "--poll-interval", "0.1")
    with EmulatorServer(config) as server:
        azure = {"AZURE_OPENAI_ENDPOINT": server.url, "AZURE_OPENAI_API_KEY": "azure-key"}
        refused, _ = maple_at(server.url, *args, **azure)
        before = server.stats()
        done, _ = maple_at(server.url, *args, *GIVEN, **azure)
        after = server.stats()
    assert refused.returncode == 2, refused.stderr
    line = one_line(refused.stderr)
    assert line.startswith("error: ") and GATEWAY_SAYS in line, line
    assert before["files_uploaded"] == 0 and before["requests_billed"] == 0
    assert done.returncode == 0, done.stderr
    output = next(tmp_path.glob("items_*.parquet"))
    assert pl.read_parquet(output)["llm_status"].to_list() == ["succeeded"] * ROWS
    assert after["files_uploaded"] == 1 and after["batches_created"] == 1
    assert after["requests_billed"] == ROWS and after["bodies_billed_twice"] == 0
    for run in (refused, done):
        assert SECRET not in run.stdout + run.stderr
    assert files_holding(tmp_path, SECRET) == []


@pytest.mark.parametrize(
    ("provider", "given", "says"),
    [
        ("openai", SECRET, "--extra-body #1 has no '='"),
        ("openai", f"token={SECRET}", "--extra-body token: the value after '=' is not JSON"),
        ("openai", f'metadata="{SECRET}"', "--extra-body metadata: Maple sets that field"),
        ("openai-realtime", f'token="{SECRET}"', "--extra-body: openai-realtime sends no control"),
    ],
)
def test_a_malformed_or_unused_field_is_one_line_and_exit_2_before_any_call(
    tmp_path: Path, provider: str, given: str, says: str
) -> None:
    args = table_job(tmp_path, "enrich", provider, ROWS)
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        run, _ = maple_at(server.url, *args, "--extra-body", given)
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith("error: ") and says in line, line
    assert SECRET not in run.stderr + run.stdout
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0
