"""Loading the code location (what every Dagster run and step process does) prints no warning
for Maple's own use of Dagster's beta and preview APIs: before, each process said that
``include_sources``, code references and the component loaders are beta or preview."""

import subprocess
import sys

from tests.e2e.cli import clean_env


def test_loading_the_code_location_prints_no_warning() -> None:
    loaded = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import maple_assets.definitions"],
        capture_output=True, text=True, env=clean_env(), timeout=120, check=False,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert "Warning" not in loaded.stderr, loaded.stderr
