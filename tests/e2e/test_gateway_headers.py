"""``--header 'NAME: VALUE'``: the headers an AI gateway requires reach it on every call of
every path (batch control calls and downloads, real-time requests, embeddings), and their
values, which may be secrets, appear nowhere: not on stderr or stdout, not in the output, not
in a file under the storage root (the job's state, the Dagster instance kept there). The
emulator plays the gateway (``--require-header``): without the header the job is exit 2 with
the gateway's own message in one line, nothing uploaded."""

import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from tests.e2e.cli import clean_env
from tests.e2e.hostile import maple_at, one_line, table_job

ROWS = 12
HEADER = "x-gateway-key"
SECRET = "gw-secret-7f3a9c1e5b"
GATEWAY_SAYS = f"The {HEADER} header is required"


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``needle``."""
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and needle.encode() in path.read_bytes()
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "provider"),
    [("enrich", "openai"), ("embed", "openai"), ("enrich", "openai-realtime")],
)
def test_a_gateways_header_reaches_it_on_every_call_and_its_value_is_stored_nowhere(
    tmp_path: Path, command: str, provider: str
) -> None:
    config = EmulatorConfig(batch_seconds=0, control_fail=0, required_headers=(HEADER,))
    args = table_job(tmp_path, command, provider, ROWS, "--poll-interval", "0.1")
    with EmulatorServer(config) as server:
        refused, _ = maple_at(server.url, *args)
        before = server.stats()
        done, _ = maple_at(server.url, *args, "--header", f"{HEADER}: {SECRET}")
        after = server.stats()
        again, _ = maple_at(server.url, *args, "--header", f"{HEADER}: {SECRET}")
    # without it: the gateway's own reason, in one line, exit 2, nothing sent
    assert refused.returncode == 2, refused.stderr
    line = one_line(refused.stderr)
    assert line.startswith("error: ") and GATEWAY_SAYS in line, line
    assert before["files_uploaded"] == 0 and before["requests_billed"] == 0
    # with it: every row, each billed once
    assert done.returncode == 0, done.stderr
    output = next(tmp_path.glob("items_*.parquet"))
    assert pl.read_parquet(output)["llm_status"].to_list() == ["succeeded"] * ROWS
    assert after["requests_billed"] == ROWS and after["bodies_billed_twice"] == 0
    # a rerun with the header again reuses every answer (the state kept no header to lose)
    assert again.returncode == 0, again.stderr
    # the value: nowhere
    for run in (refused, done, again):
        assert SECRET not in run.stdout + run.stderr
    assert files_holding(tmp_path, SECRET) == []


@pytest.mark.parametrize(
    "provider", ["openai", pytest.param("openai-realtime", marks=pytest.mark.slow)]
)
def test_a_header_value_read_from_the_environment_never_sits_in_the_command_line(
    tmp_path: Path, provider: str
) -> None:
    """``--header 'NAME: @env:VAR'``: the gateway gets VAR's value (it refuses any other with
    401), the command line holds only the variable's name, and the value is shown nowhere."""
    config = EmulatorConfig(
        batch_seconds=0, control_fail=0, required_headers=(f"{HEADER}={SECRET}",)
    )
    args = table_job(tmp_path, "enrich", provider, ROWS, "--poll-interval", "0.1")
    header = ("--header", f"{HEADER}: @env:GATEWAY_KEY")
    with EmulatorServer(config) as server:
        unset, _ = maple_at(server.url, *args, *header)
        wrong, _ = maple_at(server.url, *args, "--header", f"{HEADER}: not-the-key")
        refused = server.stats()
        done, _ = maple_at(server.url, *args, *header, GATEWAY_KEY=SECRET)
        after = server.stats()
    assert unset.returncode == 2, unset.stderr
    assert "$GATEWAY_KEY (@env:GATEWAY_KEY), which is not set" in one_line(unset.stderr)
    assert wrong.returncode == 2 and "header's value is not accepted" in wrong.stderr
    assert refused["files_uploaded"] == 0 and refused["requests_billed"] == 0
    assert done.returncode == 0, done.stderr
    assert after["requests_billed"] == ROWS and after["bodies_billed_twice"] == 0
    for run in (unset, wrong, done):
        assert SECRET not in run.stdout + run.stderr
    assert SECRET not in " ".join(done.args)
    assert files_holding(tmp_path, SECRET) == []


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("x-gateway-key gw-secret-7f3a9c1e5b", "--header #1 has no colon"),
        ("content-type: text/plain", "Header content-type is set by Maple"),
        ("x-gateway-key: g\u00e9", "outside ASCII"),
        (": gw-secret-7f3a9c1e5b", "A header has an empty name"),
        ("x gateway: gw-secret-7f3a9c1e5b", "Header name 'x gateway' is not a valid HTTP header"),
    ],
)
def test_a_malformed_header_is_one_line_and_exit_2_before_any_call(
    tmp_path: Path, given: str, says: str
) -> None:
    args = table_job(tmp_path, "enrich", "openai", ROWS)
    with EmulatorServer(EmulatorConfig(batch_seconds=0, control_fail=0)) as server:
        run, _ = maple_at(server.url, *args, "--header", given)
        stats = server.stats()
    assert run.returncode == 2, run.stderr
    line = one_line(run.stderr)
    assert line.startswith("error: ") and says in line, line
    assert SECRET not in run.stderr + run.stdout
    assert stats["files_uploaded"] == 0 and stats["requests_received"] == 0


@pytest.mark.slow
def test_maple_cancel_takes_the_headers_the_gateway_requires(tmp_path: Path) -> None:
    """The job's state keeps no header: ``maple cancel`` is given them again, as the job was;
    without them the gateway's refusal is one line, exit 2, and nothing is cancelled."""
    config = EmulatorConfig(batch_seconds=30, control_fail=0, required_headers=(HEADER,))
    header = ("--header", f"{HEADER}: {SECRET}")
    args = table_job(tmp_path, "enrich", "openai", ROWS, "--poll-interval", "0.1", *header)
    store = tmp_path / "store"
    with EmulatorServer(config) as server:
        env = clean_env(OPENAI_BASE_URL=f"{server.url}/v1", OPENAI_API_KEY="sk-hostile-test-key")
        running = subprocess.Popen(
            [sys.executable, "-m", "maple_assets.cli", *args], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not list(store.glob("hostile/state/*/submission-1.json")):
            assert time.monotonic() < deadline, "the job never submitted its batch"
            time.sleep(0.2)
        cancel = [sys.executable, "-m", "maple_assets.cli", "cancel", "hostile", "--storage",
                  str(store)]  # fmt: skip
        refused = subprocess.run(cancel, env=env, capture_output=True, text=True, check=False)
        cancelled = subprocess.run(
            [*cancel, *header], env=env, capture_output=True, text=True, check=False
        )
        _, err = running.communicate(timeout=90)
    assert refused.returncode == 2 and GATEWAY_SAYS in one_line(refused.stderr), refused.stderr
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled 1 batch(es)" in cancelled.stdout
    assert running.returncode == 4, err  # stopped: cancelled
    for run in (refused, cancelled):
        assert SECRET not in run.stdout + run.stderr
    assert SECRET not in err and files_holding(tmp_path, SECRET) == []


@pytest.mark.parametrize(
    ("provider", "model", "family"),
    [
        ("anthropic", "claude-haiku-4-5", "ANTHROPIC"),
        ("gemini-realtime", "gemini-2.5-flash", "GEMINI"),
        # ~9 s each: one API of each family in the default suite, its twin in the long pass
        pytest.param("anthropic-realtime", "claude-haiku-4-5", "ANTHROPIC", marks=pytest.mark.slow),
        pytest.param("gemini", "gemini-2.5-flash", "GEMINI", marks=pytest.mark.slow),
    ],
)
def test_every_api_sends_the_header_on_each_call(
    tmp_path: Path, provider: str, model: str, family: str
) -> None:
    """The other APIs' batch and real-time providers, through the gateway that requires it."""
    config = EmulatorConfig(batch_seconds=0, control_fail=0, required_headers=(HEADER,))
    args = table_job(tmp_path, "enrich", provider, ROWS, "--poll-interval", "0.1")
    args[args.index("--model") + 1] = model
    with EmulatorServer(config) as server:
        env = {f"{family}_BASE_URL": server.url, f"{family}_API_KEY": "test-key"}
        done, _ = maple_at(server.url, *args, "--header", f"{HEADER}: {SECRET}", **env)
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["bodies_billed_twice"] == 0
    assert SECRET not in done.stdout + done.stderr and files_holding(tmp_path, SECRET) == []


def test_a_kill_9_then_the_same_command_with_the_header_adopts_the_batch(tmp_path: Path) -> None:
    """The resumed run finds the batch created before the kill (a listing through the gateway,
    with the header from its own command line) and pays nothing twice."""
    config = EmulatorConfig(batch_seconds=0.2, control_fail=0, required_headers=(HEADER,))
    extra = ("--poll-interval", "0.1", "--max-requests-per-batch", "5")
    args = [
        *table_job(tmp_path, "enrich", "openai", ROWS, *extra),
        "--header",
        f"{HEADER}: {SECRET}",
    ]
    with EmulatorServer(config) as server:
        killed, _ = maple_at(server.url, *args, MAPLE_CRASH_AT="after_create")
        resumed, _ = maple_at(server.url, *args)
        stats = server.stats()
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = pl.read_parquet(next(tmp_path.glob("items_*.parquet")))
    assert out["llm_status"].to_list() == ["succeeded"] * ROWS
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["batches_created"] == 3
    assert files_holding(tmp_path, SECRET) == []
