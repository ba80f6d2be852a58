"""Lines a batch loses or repeats (``--drop-lines``, ``--duplicate-lines``): a completed batch
whose output lacks a share of its answered lines while it says each completed, or holds a share
of them twice, as batches have been reported to do. A lost line is not billed; a repeated one is
billed once, as a provider bills a request."""

import random


class LineFates:
    """Which answered lines a batch loses or writes twice, drawn per line from a generator
    seeded by the emulator's seed and the batch (a resent line is drawn afresh)."""

    def __init__(self, seed: int, batch: str, drop: float, duplicate: float) -> None:
        self.active = drop > 0 or duplicate > 0
        self._draw = random.Random(f"{seed}:{batch}").random
        self._drop, self._twice = drop, drop + duplicate

    def copies(self) -> int:
        """How many times the next answered line is written: 0 (lost), 1 or 2."""
        if not self.active:
            return 1
        fate = self._draw()
        return 0 if fate < self._drop else 2 if fate < self._twice else 1
