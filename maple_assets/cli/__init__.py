"""The ``maple`` command line: enrich, status, cancel, costs, emulator (``commands.main``).

``main`` is loaded on first use, so importing one of this package's modules (the Dagster home,
the error mapping) does not load the whole command line. While it loads (a second or two of
imports, until the command's own Ctrl-C handling has loaded: `startup_done`), Ctrl-C ends the
process at once with one line and exit code 130, and the cyclic
garbage collector is off (imports make little garbage, and the collector's passes over the
growing heap cost a fifth of their CPU); the command turns it on again once it has loaded what
it needs (``maple_engine.memory.settle_startup_objects``).
"""

import gc
import os
import signal
import sys
from types import FrameType
from typing import Any

INTERRUPTED = 130


def _stop_now(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write("\nstopped before anything ran\n")
    sys.stderr.flush()
    os._exit(INTERRUPTED)


def __getattr__(name: str) -> Any:
    if name == "main":
        gc.disable()
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            from maple_assets.cli.commands import main  # SIGINT ignored or handled by our caller

            return main
        signal.signal(signal.SIGINT, _stop_now)
        try:
            from maple_assets.cli.commands import main
        except BaseException:
            startup_done()
            raise
        return main
    raise AttributeError(name)


def startup_done() -> None:
    """The command's own Ctrl-C handling has loaded: Ctrl-C raises KeyboardInterrupt again."""
    if signal.getsignal(signal.SIGINT) is _stop_now:
        signal.signal(signal.SIGINT, signal.default_int_handler)
