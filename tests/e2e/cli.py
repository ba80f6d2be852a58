"""``maple`` run as a user runs it, for the end-to-end tests: one subprocess runner with the
settings of the developer's environment that would change a job's outcome left out."""

import os
import subprocess
import sys
from pathlib import Path

#: AWS settings that keep a subprocess from finding the developer's profile or an instance
#: metadata service
NO_AWS = {
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_EC2_METADATA_DISABLED": "true",
}
#: ``drop=NO_OPENAI_KEY``: the developer's OpenAI key left out, for a job that must not find it
NO_OPENAI_KEY = ("OPENAI_API_KEY",)
#: what every run leaves out of this process's environment: the developer's ledger, prices and
#: a crash point a test set for an earlier run
_ALWAYS_DROPPED = ("MAPLE_COST_DB", "MAPLE_PRICES", "MAPLE_CRASH")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any ``AWS_`` or ``MAPLE_`` setting, and no AWS
    profile or instance metadata, with ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MAPLE_"))}
    return {**env, **NO_AWS, **extra}


def maple(
    *args: str,
    url: str | None = None,
    clean: bool = False,
    drop: tuple[str, ...] = (),
    cwd: Path | None = None,
    timeout: float = 300,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """``maple ARGS`` in a subprocess, its output captured, whatever its exit code.

    The environment is this process's without ``MAPLE_COST_DB``, ``MAPLE_PRICES`` and
    ``MAPLE_CRASH_*``; ``clean`` also leaves out every ``AWS_`` and ``MAPLE_`` setting
    (`clean_env`), ``drop`` the variables starting with any of its prefixes (a provider's
    settings the caller may have). ``url`` is the emulator's (``MAPLE_EMULATOR_URL``); ``env`` is
    set last.
    """
    base = clean_env() if clean else dict(os.environ)
    dropped = (*_ALWAYS_DROPPED, *drop)
    kept = {k: v for k, v in base.items() if not k.startswith(dropped)}
    emulator = {"MAPLE_EMULATOR_URL": url} if url is not None else {}
    return subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *args],
        capture_output=True, text=True, env={**kept, **emulator, **env}, cwd=cwd,
        timeout=timeout, check=False,
    )  # fmt: skip
