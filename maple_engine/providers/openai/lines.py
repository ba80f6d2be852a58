"""Parsing of OpenAI batch output/error files into ``RESULT_SCHEMA`` rows.

The common case (a 2xx chat completion, or an embeddings list of base64 vectors) is decoded by
a msgspec typed decoder whose structs name only the fields Maple reads (custom id, status,
content or vector, refusal, finish reason, usage with cached and reasoning tokens): the others
are skipped unread. Nothing decoded is left for the cyclic garbage collector: the structs
hold no cycles and are not tracked, and a reply's arrays (choices, vectors) are tuples, which
it stops tracking (as lists, the ones a block held were promoted and walked again and again:
15-20% more CPU than pyarrow's JSON reader with a fixed schema, which this replaced, in a
process holding the engine's modules; as tuples, 5-10% less). A downloaded file is mapped
into memory and decoded in blocks of whole lines, one decoder call a block (no line is copied
out of the file); a block whose values are not its lines one to one (a blank line, a line the
types refuse) is decoded a line at a time. A line the types refuse (an unexpected type from
some gateway, vectors as float lists) goes through the per-line Python parser, as do failed
lines, usually few, and Responses API replies (their output a list of typed items).
"""

import contextlib
import mmap
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import orjson
import polars as pl

from maple_engine.failures import FailureClass
from maple_engine.providers.base import RESULT_SCHEMA, result_frame


class _Message(msgspec.Struct, gc=False):
    content: str | None = None
    refusal: str | None = None


class _Choice(msgspec.Struct, gc=False):
    message: _Message | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: int | None = None


class _CompletionDetails(msgspec.Struct, gc=False):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Vector(msgspec.Struct, gc=False):
    embedding: str | None = None  # base64 float32 (embeddings)


class _Body(msgspec.Struct, gc=False):
    object: str | None = None
    data: tuple[_Vector, ...] | None = None
    choices: tuple[_Choice, ...] | None = None
    usage: _Usage | None = None


class _Response(msgspec.Struct, gc=False):
    status_code: int | None = None
    body: _Body | None = None


class _Line(msgspec.Struct, gc=False):
    custom_id: str | None = None
    response: _Response | None = None
    error: Any = None


_LINE = msgspec.json.Decoder(_Line)
_REFUSED = FailureClass.REFUSED.value
#: a file is decoded this many bytes at a time (about 10,000 chat lines), each block ending
#: at the end of a line
_BLOCK_BYTES = 8 << 20
_NEWLINE = re.compile(b"\n")

LineParser = Callable[[dict[str, Any]], dict[str, Any]]


def parse_result_file(source: bytes | str, batch_id: str, parse_line: LineParser) -> pl.DataFrame:
    """All lines of one output or error file (its bytes, or the path of a downloaded file) as
    result rows: the chat completions and embeddings that succeeded first, then the rest, each
    in file order. A file is mapped into memory, not read, and decoded a block at a time: only
    the rows are held (a decoded block's pages are let go)."""
    good: dict[str, list[Any]] = {name: [] for name in _FAST_COLUMNS}
    rest: list[bytes] = []
    with _mapped(source) as data:
        for start, end in _blocks(data):
            rest += _take_block(data, start, end, good)
            _let_go(data, end)
    frame = _frame(good, batch_id)
    if not rest:
        return frame
    return pl.concat([frame, _parsed(rest, batch_id, parse_line)])


Data = bytes | mmap.mmap


@contextlib.contextmanager
def _mapped(source: bytes | str) -> Iterator[Data]:
    """The file's bytes: ``source`` itself, or the file at that path mapped read-only."""
    if isinstance(source, bytes):
        yield source
        return
    with open(source, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:  # an empty file cannot be mapped
            yield b""
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            yield mapped


def _let_go(data: Data, end: int) -> None:
    """Drop the mapped file's pages before ``end`` from this process's memory (they stay in
    the page cache): a file's pages would otherwise count in its RSS until it is unmapped."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        data.madvise(mmap.MADV_DONTNEED, 0, end - end % mmap.PAGESIZE)


def _blocks(data: Data) -> Iterator[tuple[int, int]]:
    """Where each block of about ``_BLOCK_BYTES`` starts and ends, ending where a line does."""
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", min(start + _BLOCK_BYTES, size) - 1) + 1 or size
        yield start, end
        start = end


def _take_block(data: Data, start: int, end: int, columns: dict[str, list[Any]]) -> list[bytes]:
    """Add the successes of the block ``data[start:end]`` to ``columns``; return its other
    non-blank lines.

    The block is decoded in one call, a value per line; one whose values are not its lines one
    to one (a blank line, a line the types refuse) is decoded a line at a time."""
    with memoryview(data) as whole, whole[start:end] as block:
        try:
            typed: list[_Line] | None = _LINE.decode_lines(block)
        except msgspec.DecodeError:
            typed = None
    unended = data[end - 1 : end] != b"\n"  # the file's last line, without its newline
    if typed is None or len(typed) != len(_NEWLINE.findall(data, start, end)) + unended:
        lines = _lines_of(data[start:end])
        return [
            line
            for line, one in zip(lines, _decoded(lines), strict=True)
            if not _kept(one, columns)
        ]
    missed = [i for i, one in enumerate(typed) if not _add_success(one, columns)]
    if not missed:
        return []
    lines = _lines_of(data[start:end])
    return [lines[i] for i in missed]


def _kept(line: _Line | None, columns: dict[str, list[Any]]) -> bool:
    return line is not None and _add_success(line, columns)


def _lines_of(block: bytes) -> list[bytes]:
    """The block's non-blank lines."""
    return [line for line in block.split(b"\n") if line.strip()]


def _decoded(raw: list[bytes]) -> list[_Line | None]:
    """Each line typed; None for a line the types refuse."""
    decode = _LINE.decode
    try:
        return [decode(line) for line in raw]
    except msgspec.DecodeError:
        return [_typed(line) for line in raw]


def _typed(line: bytes) -> _Line | None:
    try:
        return _LINE.decode(line)
    except msgspec.DecodeError:
        return None


_FAST_COLUMNS = (
    "custom_id",
    "status",
    "failure_class",
    "error",
    "response",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
)


def _add_success(line: _Line, columns: dict[str, list[Any]]) -> bool:
    """Append a 2xx chat completion or embeddings line's row to ``columns``; False (nothing
    appended) for any other line: an error, a non-2xx status, a Responses reply."""
    response = line.response
    if line.error is not None or response is None or response.body is None:
        return False
    status = response.status_code
    body = response.body
    if status is None or not 200 <= status <= 299 or body.object == "response":
        return False
    choice = body.choices[0] if body.choices else None
    message = choice.message if choice is not None else None
    refusal = message.refusal if message is not None else None
    refused = refusal is not None or (
        choice is not None and choice.finish_reason == "content_filter"
    )
    if refused:
        reply = None
    elif body.object == "list":
        reply = body.data[0].embedding if body.data else None
    else:
        content = message.content if message is not None else None
        reply = content if content is not None else ""
    usage = body.usage
    columns["custom_id"].append(line.custom_id)
    columns["status"].append("failed" if refused else "succeeded")
    columns["failure_class"].append(_REFUSED if refused else None)
    columns["error"].append((refusal or "content filtered") if refused else None)
    columns["response"].append(reply)
    if usage is None:
        columns["input_tokens"].append(None)
        columns["cached_input_tokens"].append(0)
        columns["output_tokens"].append(None)
        columns["reasoning_tokens"].append(None)
        return True
    prompt, cached = usage.prompt_tokens_details, usage.completion_tokens_details
    columns["input_tokens"].append(usage.prompt_tokens or 0)
    columns["cached_input_tokens"].append((prompt.cached_tokens or 0) if prompt else 0)
    columns["output_tokens"].append(usage.completion_tokens or 0)
    columns["reasoning_tokens"].append(cached.reasoning_tokens if cached else None)
    return True


def _frame(columns: dict[str, list[Any]], batch_id: str) -> pl.DataFrame:
    """The result rows of the lines ``_add_success`` took: billed, from ``batch_id``."""
    height = len(columns["custom_id"])
    return result_frame(
        {
            **columns,
            "billed": [True] * height,
            "cache_write_tokens": [0] * height,
            "batch_id": [batch_id] * height,
        }
    )


def _slow(source: bytes | str, batch_id: str, parse_line: LineParser) -> pl.DataFrame:
    """Every line of a file (its bytes, or its path) through the per-line parser."""
    return _parsed(_lines(source), batch_id, parse_line)


def _lines(source: bytes | str) -> list[bytes]:
    """The non-blank lines of a file's bytes, or of the file at a path."""
    with _mapped(source) as data:
        return [line for start, end in _blocks(data) for line in _lines_of(data[start:end])]


def _parsed(raw: list[bytes], batch_id: str, parse_line: LineParser) -> pl.DataFrame:
    """The ``raw`` lines through the per-line parser."""
    rows: dict[str, list[Any]] = {name: [] for name in RESULT_SCHEMA}
    for line in raw:
        parsed = parse_line(orjson.loads(line))
        parsed["batch_id"] = batch_id
        for name in RESULT_SCHEMA:
            rows[name].append(parsed.get(name))
    return result_frame(rows)
