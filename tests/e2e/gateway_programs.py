"""Real AI gateway programs between ``maple`` and the emulator, for the slow pass: LiteLLM's
proxy (PyPI ``litellm[proxy]``) and Portkey's gateway (npm ``@portkey-ai/gateway``). ``.ci/run``
installs each, pinned, in its own folder (the product never imports them) and exports where:
``MAPLE_TEST_LITELLM`` (the ``litellm`` command; else one on the PATH) and
``MAPLE_TEST_PORTKEY`` (the gateway's ``build/start-server.js``, run with ``node``); without
them the tests skip, naming the variable.

Each program starts on a free port in its own process group, is waited for on a route that
answers only once it serves (its log in the failure), and is killed with its group after. One
that dies while a test uses it (a model server's segfault) fails that test as a crash of the
program, its exit status and the end of its log (`crashed_programs`, read by the hook in
``tests/conftest.py``), not as whatever the job then saw (``connection refused``)."""

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest

from tests.e2e.cli import clean_env

LITELLM = os.environ.get("MAPLE_TEST_LITELLM") or shutil.which("litellm")
PORTKEY = os.environ.get("MAPLE_TEST_PORTKEY")
LITELLM_KEY = "sk-litellm-master"  # the proxy's master key: what maple sends it
UPSTREAM_KEY = "sk-emulator"  # what the proxy sends the emulator
READY_SECONDS = 120  # a loaded 2-core machine: LiteLLM's proxy takes 9 s when idle


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: the programs whose `running` block is open, by process id
_WATCHED: dict[int, tuple["subprocess.Popen[bytes]", str, Path]] = {}


def _log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def _wait_ready(
    process: "subprocess.Popen[bytes]", url: str, headers: dict[str, str], log: Path
) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"the program exited ({process.returncode}) before {url} answered; its log:\n"
                + _log_tail(log)
            )
        try:
            if httpx.get(url, headers=headers, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(
        f"{url} did not answer 200 in {READY_SECONDS} s; its log:\n{_log_tail(log)}"
    )


def _exit_status(returncode: int) -> str:
    if returncode < 0:
        with suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name} ({returncode})"
    return f"exited with code {returncode}"


def crashed_programs() -> list[str]:
    """For each program started by `running` that has died while its block is open: which
    program, its exit status and the end of its log."""
    return [
        f"the test's server ({name}) crashed, {_exit_status(process.returncode)}; its log ends:\n"
        + _log_tail(log)
        for process, name, log in list(_WATCHED.values())
        if process.poll() is not None
    ]


@contextmanager
def running(
    command: list[str], ready: str, headers: dict[str, str], log: Path, **env: str
) -> Iterator["subprocess.Popen[bytes]"]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=clean_env(**env),
            start_new_session=True,
        )  # fmt: skip
        name = " ".join(Path(part).name for part in command[:3] if part)
        try:
            _wait_ready(process, ready, headers, log)
            _WATCHED[process.pid] = (process, name, log)
            yield process
        finally:
            stop(process)


def stop(process: "subprocess.Popen[bytes]") -> None:
    """Kill a program `running` started, as a test means to (not a crash): kill -9 its group."""
    _WATCHED.pop(process.pid, None)
    with suppress(ProcessLookupError):  # it may have died alone
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def _litellm_config(upstream: str, where: Path) -> Path:
    """Chat and embedding models routed to ``upstream`` as OpenAI, and the files and batches
    passed through to it (no database: LiteLLM's managed files are not used)."""
    models = "".join(
        f"  - model_name: {name}\n    litellm_params:\n      model: openai/{name}\n"
        f"      api_base: {upstream}\n      api_key: {UPSTREAM_KEY}\n"
        for name in ("gpt-4o-mini", "text-embedding-3-small")
    )
    files = (
        f"files_settings:\n  - custom_llm_provider: openai\n    api_base: {upstream}\n"
        f"    api_key: {UPSTREAM_KEY}\n"
    )
    config = where / "litellm.yaml"
    config.write_text(
        f"model_list:\n{models}{files}general_settings:\n  master_key: {LITELLM_KEY}\n"
    )
    return config


@contextmanager
def litellm_proxy(emulator_url: str, where: Path) -> Iterator[str]:
    """LiteLLM's proxy in front of the emulator: its base URL (``.../v1``)."""
    if LITELLM is None:
        pytest.skip("LiteLLM's proxy is not installed (.ci/run installs it; MAPLE_TEST_LITELLM)")
    upstream = f"{emulator_url}/v1"
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    command = [LITELLM, "--config", str(_litellm_config(upstream, where)),
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    auth = {"Authorization": f"Bearer {LITELLM_KEY}"}
    # batches without a model go to the OpenAI provider's environment; the cost map is the
    # package's own (no fetch from GitHub at start)
    env = {"OPENAI_API_KEY": UPSTREAM_KEY, "OPENAI_API_BASE": upstream,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    with running(command, f"{base}/models", auth, where / "litellm.log", **env):
        yield base


#: LiteLLM's executed batches (``scripts/litellm_batch_server.py``), run by LiteLLM's Python
LITELLM_BATCHES = Path(__file__).parents[2] / "scripts" / "litellm_batch_server.py"


@contextmanager
def litellm_batch_server(
    models: dict[str, str], database: str, where: Path, *options: str, port: int = 0, **env: str
) -> Iterator[tuple[str, "subprocess.Popen[bytes]"]]:
    """LiteLLM's executed batches over ``models`` (name: base URL), kept in the PostgreSQL
    database ``database`` (a SQLAlchemy URL): its base URL (``.../v1``) and its process."""
    python = Path(LITELLM).with_name("python") if LITELLM else None
    if python is None or not python.exists():
        pytest.skip("LiteLLM is not installed (.ci/run installs it; MAPLE_TEST_LITELLM)")
    port = port or free_port()
    base = f"http://127.0.0.1:{port}/v1"
    command = [str(python), str(LITELLM_BATCHES), "--port", str(port), "--key", LITELLM_KEY,
               "--database", database.replace("+psycopg2", ""), *options]  # fmt: skip
    for name, url in models.items():
        command += ["--model", f"{name}={url}"]
    auth = {"Authorization": f"Bearer {LITELLM_KEY}"}
    log = where / f"litellm-batches-{port}-{time.monotonic_ns()}.log"  # one for each start
    with running(
        command, f"{base}/models", auth, log, LITELLM_LOCAL_MODEL_COST_MAP="True", **env
    ) as process:
        yield base, process


def portkey_headers(emulator_url: str) -> list[str]:
    """The ``--header`` arguments that route a call through Portkey to the emulator."""
    return [
        "--header", "x-portkey-provider: openai",
        "--header", f"x-portkey-custom-host: {emulator_url}/v1",
    ]  # fmt: skip


@contextmanager
def portkey_gateway(where: Path) -> Iterator[str]:
    """Portkey's gateway (routes per request, from the headers): its base URL (``.../v1``)."""
    node = shutil.which("node")
    if PORTKEY is None or node is None:
        pytest.skip("Portkey's gateway or node is not installed (.ci/run; MAPLE_TEST_PORTKEY)")
    port = free_port()
    command = [node, PORTKEY, f"--port={port}", "--headless"]
    # its /v1/models answers 500 on Node 20 (see test_portkey_gateway): its root says it serves
    with running(command, f"http://127.0.0.1:{port}/", {}, where / "portkey.log"):
        yield f"http://127.0.0.1:{port}/v1"
