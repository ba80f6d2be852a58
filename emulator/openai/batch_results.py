"""A finished pass over an OpenAI batch file, settled: its counters added to the emulator's
stats (and the billed requests), and, for a cancelled batch, its files cut where it stopped."""

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from emulator.core.outcome import BILLED_BY_KIND
from emulator.openai.batch_lines import PassResult, Writer, unrun_line

if TYPE_CHECKING:
    from emulator.core.state import State


def commit(state: "State", result: PassResult, done: int) -> tuple[int, int, tuple[int, int, int]]:
    """Add the counters of lines with index < ``done``; returns (ok, failed, tokens: in, out and
    of the input those read from the prompt cache). A line the batch lost counts as ok, as the
    batch reports it, and is not billed."""
    stats: Counter[str] = Counter()
    ok = [entry for entry in result.ok if entry[0] < done]
    failed = [entry for entry in result.failed if entry[0] < done]
    for _, fault in failed:
        if fault is not None:
            stats[f"fault_{fault}"] += 1
    dropped = sum(1 for index, _ in result.dropped if index < done)
    stats["lines_dropped"] += dropped
    stats["lines_duplicated"] += sum(1 for index in result.duplicated if index < done)
    stats["requests_received"] += len(ok) + len(failed) + dropped
    stats["batch_lines_processed"] += result.total
    extra = sum(extra for index, extra in result.extra_units if index < done)
    stats["requests_billed"] += extra
    stats[BILLED_BY_KIND[result.kind]] += extra
    state.stats.merge(stats)
    state.stats.bill((entry[1] for entry in ok), result.kind)
    tokens = (sum(e[2] for e in ok), sum(e[3] for e in ok), sum(e[4] for e in ok))
    return len(ok) + dropped, len(failed), tokens


def cut_files(state: "State", result: PassResult, prefix: str, done: int) -> None:
    """Rewrite a pass's files so that lines with index >= ``done`` become ``batch_cancelled``."""
    unrun: list[tuple[int, str]] = []
    paths: list[Path | None] = []
    for path in (result.output_path, result.error_path):
        if path is None:
            paths.append(None)
            continue
        kept = Writer(state.new_path())
        with path.open("rb") as handle:
            for raw in handle:
                record = orjson.loads(raw)
                index = int(record["id"][-6:], 16)
                if index < done:
                    kept.add(raw.rstrip(b"\n"))
                else:
                    unrun.append((index, record["custom_id"]))
        path.unlink(missing_ok=True)
        paths.append(kept.close())
    errors = Writer(state.new_path())
    if paths[1] is not None:
        errors.add(paths[1].read_bytes().rstrip(b"\n"))
        paths[1].unlink()
    unrun += [(index, custom_id) for index, custom_id in result.dropped if index >= done]
    for index, custom_id in sorted(set(unrun)):  # a line written twice is unrun once
        errors.add(unrun_line(prefix, index, custom_id, "batch_cancelled"))
    result.output_path, result.error_path = paths[0], errors.close()
