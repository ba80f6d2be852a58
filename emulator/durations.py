"""How long each emulated batch takes: ``batch_seconds``, or with ``batch_seconds_spread``
(sigma) a log-normal draw whose median is ``batch_seconds``; with ``stall`` (a rate) some
batches stay in progress ``stall_factor`` times longer, as a provider's stuck batches do.
Draws come from one seeded generator, so a run with the same seed and order repeats."""

import math
import random
import threading
from typing import Protocol

from emulator.config import EmulatorConfig


class _Counters(Protocol):
    def add(self, name: str, amount: int = 1) -> None: ...


class BatchDurations:
    """Draws each new batch's duration; counts stalled batches in ``batches_stalled``."""

    def __init__(self, config: EmulatorConfig, stats: _Counters) -> None:
        self._config = config
        self._stats = stats
        self._rng = random.Random(config.seed ^ 0xBA7C4)
        self._lock = threading.Lock()

    def draw(self) -> float:
        config = self._config
        with self._lock:
            seconds = config.batch_seconds
            if config.batch_seconds_spread > 0:
                seconds *= math.exp(self._rng.gauss(0.0, config.batch_seconds_spread))
            if config.stall > 0 and self._rng.random() < config.stall:
                self._stats.add("batches_stalled")
                seconds *= config.stall_factor
            return seconds
