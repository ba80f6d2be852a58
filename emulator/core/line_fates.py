"""Lines a batch loses or repeats (``--drop-lines``, ``--duplicate-lines``): a completed batch
whose output lacks a share of its answered lines while it says each completed, or holds a share
of them twice, as batches have been reported to do. A lost line is not billed; a repeated one is
billed once, as a provider bills a request."""

import random


class LineFates:
    """Which answered lines a batch loses or writes twice: each share spread evenly over the
    batch's lines from a phase seeded by the emulator's seed and the batch, so a batch of n
    lines loses n x share of them (rounded either way) wherever its id falls, and a resent
    line, in a batch of its own, is lost again only with the share's chance."""

    def __init__(self, seed: int, batch: str, drop: float, duplicate: float) -> None:
        self.active = drop > 0 or duplicate > 0
        draw = random.Random(f"{seed}:{batch}").random
        self._drop, self._twice = drop, duplicate
        self._drop_level, self._twice_level = draw(), draw()

    def copies(self) -> int:
        """How many times the next answered line is written: 0 (lost), 1 or 2."""
        if not self.active:
            return 1
        self._drop_level += self._drop
        if self._drop_level >= 1:
            self._drop_level -= 1
            return 0
        self._twice_level += self._twice
        if self._twice_level >= 1:
            self._twice_level -= 1
            return 2
        return 1
