"""The rows of a sparse version (`maple_engine.plan.changed_rows`) for the merge: the input
itself, streamed block by block, each block with the answers of its sent rows and the stored
records of the others.

Memory holds one input block, its fills (read through the fill files' row-group statistics) and
the responses of the one or two shards whose rows it spans; no row is rendered or re-cut.
"""

from collections import deque
from collections.abc import Iterator

import polars as pl

from maple_engine.collect.responses import fill_responses
from maple_engine.collect.shard_responses import shard_responses
from maple_engine.errors import ConfigError
from maple_engine.inputs.sources import iter_blocks
from maple_engine.job import Job
from maple_engine.model import REUSED, ROW_ID, ShardInfo, Version
from maple_engine.plan.copied_answers import PreviousAnswers
from maple_engine.plan.versions import job_input_digest, shard_fills
from maple_engine.state import JobState

#: An input block with its row ids, its sent rows' responses and its filled rows' records.
Piece = tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]


def input_pieces(
    job: Job,
    version: Version,
    source: str,
    shards: list[ShardInfo],
    previous: PreviousAnswers | None = None,
) -> Iterator[Piece]:
    """The input of ``version`` in blocks, in order, each with its answers (``previous``: the
    answers of unchanged rows, copied from the last merged output)."""
    storage = job.state.storage
    if job_input_digest(source, job.spec, storage.s3) != version.input_digest:
        raise ConfigError(
            f"The input {source!r} of job {job.spec.name!r} changed after its shards were cut "
            f"(version {version.number}), so its rows no longer match the answers. Run "
            "`maple enrich` again on it: the new rows are sent, the others reused."
        )
    sent = SentAnswers(job.state, shards)
    offset = 0
    for block in iter_blocks(source, s3=storage.s3):
        if block.height == 0:
            continue
        last = offset + block.height - 1
        ids = pl.int_range(offset, last + 1, dtype=pl.Int64, eager=True)
        filled = fill_responses(shard_fills(storage, job.spec.name, version.number, offset, last))
        copied = previous.take(block.height) if previous is not None else pl.DataFrame()
        if copied.height:
            filled = (
                pl.concat([filled, copied], how="diagonal_relaxed") if filled.height else copied
            )
        yield block.with_columns(ids.alias(ROW_ID)), sent.between(offset, last), filled
        offset = last + 1


class SentAnswers:
    """The responses of a version's sent rows, by row range, reading each shard's once."""

    def __init__(self, state: JobState, shards: list[ShardInfo]) -> None:
        self.state = state
        self.ahead = deque(sorted(shards, key=lambda s: s.first_row))
        self.loaded: list[tuple[ShardInfo, pl.DataFrame]] = []
        self.empty: pl.DataFrame | None = None

    def between(self, first: int, last: int) -> pl.DataFrame:
        """The responses of rows ``first..last`` (an empty frame if none was sent)."""
        self.loaded = [(s, f) for s, f in self.loaded if s.last_row >= first]
        while self.ahead and self.ahead[0].first_row <= last:
            shard = self.ahead.popleft()
            frame = shard_responses(self.state, shard.key).with_columns(pl.lit(False).alias(REUSED))
            self.empty = frame.clear()
            self.loaded.append((shard, frame))
        parts = [f.filter(pl.col(ROW_ID).is_between(first, last)) for _, f in self.loaded]
        if parts:
            return pl.concat(parts, how="diagonal_relaxed")
        if self.empty is None:  # rows before the first sent one: the first shard's columns
            self.empty = shard_responses(self.state, self.ahead[0].key).clear()
            self.empty = self.empty.with_columns(pl.lit(False).alias(REUSED))
        return self.empty
