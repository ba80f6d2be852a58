"""``maple`` run as a user runs it, for the end-to-end tests: a subprocess against an emulator's
URL, with the ledger and price overrides of the developer's environment left out."""

import os
import subprocess
import sys


def maple(url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"MAPLE_COST_DB", "MAPLE_PRICES"}}
    return subprocess.run(
        [sys.executable, "-m", "maple_assets.cli", *args],
        capture_output=True,
        text=True,
        env={**clean, "MAPLE_EMULATOR_URL": url, **env},
        timeout=300,
        check=False,
    )
