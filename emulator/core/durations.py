"""How long each emulated batch takes: ``batch_seconds`` plus ``batch_seconds_per_1k`` per 1,000
requests in it, or with ``batch_seconds_spread`` (sigma) a log-normal draw whose median is that;
with ``stall`` (a rate) some batches stay in progress ``stall_factor`` times longer, as a
provider's stuck batches do. Draws come from one seeded generator, so a run with the same seed
and order repeats."""

import math
import random
import threading
from pathlib import Path
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

    def draw(self, requests: int) -> float:
        """The duration of a new batch of ``requests`` requests."""
        config = self._config
        with self._lock:
            seconds = config.batch_seconds + config.batch_seconds_per_1k * requests / 1000
            if config.batch_seconds_spread > 0:
                seconds *= math.exp(self._rng.gauss(0.0, config.batch_seconds_spread))
            if config.stall > 0 and self._rng.random() < config.stall:
                self._stats.add("batches_stalled")
                seconds *= config.stall_factor
            return seconds

    def draw_for_file(self, path: Path) -> float:
        """`draw` for a batch whose requests are the non-empty lines of a JSONL file (counted
        only when the size matters)."""
        if self._config.batch_seconds_per_1k <= 0:
            return self.draw(0)
        with path.open("rb") as handle:
            return self.draw(sum(1 for line in handle if line.strip()))
