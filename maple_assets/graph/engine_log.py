"""The engine's log lines (``maple.*`` loggers: a provider call retrying through an outage, say)
in the Dagster run or sensor tick that is running the engine."""

import contextlib
import logging
from collections.abc import Iterator

ENGINE_LOGGER = "maple"


class _ToDagster(logging.Handler):
    def __init__(self, target: logging.Logger) -> None:
        super().__init__(logging.INFO)
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        self.target.log(record.levelno, record.getMessage())


@contextlib.contextmanager
def engine_log_to(target: logging.Logger) -> Iterator[None]:
    """Forward the engine's INFO and above to ``target`` (``context.log``) while inside."""
    engine = logging.getLogger(ENGINE_LOGGER)
    handler = _ToDagster(target)
    engine.addHandler(handler)
    if engine.level == logging.NOTSET or engine.level > logging.INFO:
        engine.setLevel(logging.INFO)
    try:
        yield
    finally:
        engine.removeHandler(handler)
