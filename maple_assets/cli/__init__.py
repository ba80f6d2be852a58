"""The ``maple`` command line: enrich, status, cancel, costs, emulator (``commands.main``).

``main`` is loaded on first use, so importing one of this package's modules (the Dagster home,
the error mapping) does not load the whole command line.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "main":
        from maple_assets.cli.commands import main

        return main
    raise AttributeError(name)
