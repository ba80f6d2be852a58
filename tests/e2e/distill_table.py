"""A table of grocery items for ``--distill`` tests: each title holds a few filler words and,
for most rows, one aisle word, so the emulator's ``--label-rule keywords`` answers follow a rule
a classifier can learn from the titles' embeddings."""

import random
from pathlib import Path

import orjson
import polars as pl

AISLES = ["other", "dairy", "produce", "bakery", "frozen"]
SCHEMA = {
    "type": "object",
    "properties": {"aisle": {"type": "string", "enum": AISLES}},
    "required": ["aisle"],
    "additionalProperties": False,
}
PROMPT = "Item: {title}"
SYSTEM = "Answer with the aisle the item belongs to."
_FILLER = [f"w{i}" for i in range(400)]


def write_items(path: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` items at ``path`` (Parquet): ``sku`` and ``title``."""
    rng = random.Random(seed)
    titles = []
    for _ in range(rows):
        words = rng.sample(_FILLER, rng.randint(3, 7))
        if rng.random() < 0.85:
            words.insert(rng.randrange(len(words) + 1), rng.choice(AISLES[1:]))
        titles.append(" ".join(words))
    pl.DataFrame({"sku": [f"s{i}" for i in range(rows)], "title": titles}).write_parquet(path)
    return path


def write_schema(path: Path) -> Path:
    path.write_bytes(orjson.dumps(SCHEMA))
    return path


def rule_label(title: str) -> str:
    """What ``--label-rule keywords`` answers for ``title`` (no noise)."""
    words = set(title.split())
    return next((aisle for aisle in AISLES if aisle in words), AISLES[0])
