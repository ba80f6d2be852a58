"""``maple webhooks`` as a user runs it: a real process on a free port of 127.0.0.1, and
deliveries signed as OpenAI signs them, for the tests."""

import base64
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from emulator.core.webhooks import signature, signing_key

SECRET = "whsec_" + base64.b64encode(b"maple-tests-webhook-signing-key!").decode()


@contextlib.contextmanager
def webhooks_process(root: Path, log: Path, secret: str = SECRET) -> Iterator[str]:
    """``maple webhooks --port 0`` recording under ``root``, its stderr in ``log``: yields the
    URL of OpenAI's path."""
    env = {**os.environ, "OPENAI_WEBHOOK_SECRET": secret, "MAPLE_STORAGE": str(root)}
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "maple_assets.cli", "webhooks", "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=err, env=env,
        )  # fmt: skip
        try:
            yield f"http://127.0.0.1:{_port(process, log)}/webhooks/openai"
        finally:
            process.terminate()
            process.wait(timeout=10)


def _port(process: "subprocess.Popen[bytes]", log: Path) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text())
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            raise RuntimeError(f"maple webhooks exited: {log.read_text()}")
        time.sleep(0.05)
    raise RuntimeError("maple webhooks did not start within 30 s")


def delivery(
    batch_id: str, webhook_id: str, *, secret: str = SECRET, sent: float | None = None,
    kind: str = "batch.completed",
) -> tuple[bytes, dict[str, str]]:  # fmt: skip
    """The body and headers of one OpenAI batch event, signed with ``secret`` at ``sent``."""
    body = orjson.dumps(
        {"id": "evt_test", "object": "event", "created_at": int(time.time()), "type": kind,
         "data": {"id": batch_id}}
    )  # fmt: skip
    stamp = int(time.time() if sent is None else sent)
    headers = {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature(signing_key(secret), webhook_id, stamp, body),
    }
    return body, headers
