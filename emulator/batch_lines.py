"""The hot path: validate an OpenAI batch input file and turn its lines into output files."""

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from emulator.state import State

MAX_REPORTED_ERRORS = 1000
_FLUSH_LINES = 4096
_UNRUN_MESSAGES = {
    "batch_expired": "This request could not be executed before the completion window expired.",
    "batch_cancelled": "This request was not executed because the batch was cancelled.",
}


@dataclass
class Validation:
    """Outcome of validating an input file: batch-level errors, request count, model, lines."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    model: str | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)


def _error(
    code: str, message: str, line: int | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


def validate_lines(path: Path, endpoint: str, max_requests: int, max_bytes: int) -> Validation:
    """Check an input file as OpenAI does before running a batch (codes as in ``errors.data``)."""
    result = Validation()
    if path.stat().st_size > max_bytes:
        limit = max_bytes // (1024 * 1024)
        result.errors.append(
            _error("file_too_large", f"The input file exceeds the {limit} MB batch limit.")
        )
        return result
    raw_lines = path.read_bytes().split(b"\n")
    count = sum(1 for raw in raw_lines if raw.strip())
    if count == 0:
        result.errors.append(_error("empty_file", "The input file is empty."))
        return result
    if count > max_requests:
        message = f"The input file has {count} requests; a batch accepts at most {max_requests}."
        result.errors.append(_error("too_many_tasks", message))
        return result
    seen: set[str] = set()
    errors = result.errors
    for number, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        problem, line = _check_line(raw, number, endpoint, seen)
        if problem is None and line is not None:
            model = line["body"].get("model")
            if result.model is None:
                result.model = model
            elif model != result.model:
                problem = _error(
                    "model_mismatch",
                    "All requests in a batch must use the same model.",
                    number,
                    "body.model",
                )
        if problem is not None:
            if len(errors) < MAX_REPORTED_ERRORS:
                errors.append(problem)
            continue
        result.lines.append(line)
    result.total = count
    return result


def _check_line(  # noqa: PLR0911  (one exit per validation rule)
    raw: bytes, number: int, endpoint: str, seen: set[str]
) -> tuple[dict[str, Any] | None, Any]:
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _error(
            "invalid_json_line", "This line is not parseable as valid JSON.", number
        ), None
    if not isinstance(line, dict):
        return _error("invalid_json_line", "Each line must be a JSON object.", number), None
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return _error(
            "missing_required_parameter",
            "Missing required parameter: 'custom_id'.",
            number,
            "custom_id",
        ), None
    if custom_id in seen:
        return _error(
            "duplicate_custom_id",
            f"The custom_id '{custom_id}' is used more than once.",
            number,
            "custom_id",
        ), None
    seen.add(custom_id)
    if line.get("method") != "POST":
        return _error(
            "invalid_method", "Only the POST method is supported.", number, "method"
        ), None
    if line.get("url") != endpoint:
        message = f"The url '{line.get('url')}' does not match the batch endpoint '{endpoint}'."
        return _error("url_mismatch", message, number, "url"), None
    if not isinstance(line.get("body"), dict):
        return _error(
            "missing_required_parameter", "Missing required parameter: 'body'.", number, "body"
        ), None
    return None, line


def _parsed_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                yield line


@dataclass
class RunResult:
    """Files and counts produced by running a batch's lines."""

    output_path: Path | None
    error_path: Path | None
    total: int
    succeeded: int
    failed: int
    input_tokens: int
    output_tokens: int

    def usage(self) -> dict[str, Any]:
        """The batch-level ``usage`` aggregate."""
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + self.output_tokens,
        }


class _Sink:
    """Buffered JSONL writer that creates its file only when the first line arrives."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._buffer: list[bytes] = []
        self._handle: Any = None

    def add(self, line: bytes) -> None:
        self._buffer.append(line)
        self.count += 1
        if len(self._buffer) >= _FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        if self._handle is None:
            self._handle = self.path.open("wb")
        self._handle.write(b"\n".join(self._buffer) + b"\n")
        self._buffer.clear()

    def close(self) -> Path | None:
        self.flush()
        if self._handle is None:
            return None
        self._handle.close()
        return self.path


class LineRunner:
    """Runs parsed input lines through the OpenAI engine, writing output and error JSONL."""

    def __init__(self, state: "State", batch_id: str, endpoint: str) -> None:
        self.state = state
        self.endpoint = endpoint
        self.prefix = batch_id.removeprefix("batch_")

    def run(self, lines: Path | list[dict[str, Any]], done: int, unrun_code: str) -> RunResult:
        """Run the first ``done`` lines; the rest get ``unrun_code`` error lines."""
        source = _parsed_lines(lines) if isinstance(lines, Path) else lines
        out, err = _Sink(self.state.new_path()), _Sink(self.state.new_path())
        engine, endpoint, prefix = self.state.openai, self.endpoint, self.prefix
        active = engine.drawer.active
        counts: Counter[str] = Counter()
        billed: list[bytes] = []
        tokens_in = tokens_out = 0
        index = -1
        for index, line in enumerate(source):
            custom_id = line["custom_id"]
            if index >= done:
                err.add(_unrun_line(prefix, index, custom_id, unrun_code))
                continue
            body = line["body"]
            canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
            key = hashlib.blake2b(canonical, digest_size=16).digest() if active else None
            outcome = engine.run(endpoint, body, key)
            record = {
                "id": f"batch_req_{prefix}{index:06x}",
                "custom_id": custom_id,
                "response": {
                    "status_code": outcome.status,
                    "request_id": f"req_{prefix}{index:06x}",
                    "body": outcome.body,
                },
                "error": None,
            }
            if outcome.fault is not None:
                counts[f"fault_{outcome.fault}"] += 1
            if outcome.status == 200:
                out.add(orjson.dumps(record))
                billed.append(
                    hashlib.blake2b(custom_id.encode() + b"\0" + canonical, digest_size=16).digest()
                )
                tokens_in += outcome.prompt_tokens
                tokens_out += outcome.completion_tokens
            else:
                err.add(orjson.dumps(record))
        total = index + 1
        counts["requests_received"] += min(done, total)
        counts["batch_lines_processed"] += total
        self.state.stats.merge(counts)
        self.state.stats.bill(billed)
        return RunResult(
            out.close(), err.close(), total, out.count, err.count, tokens_in, tokens_out
        )


def _unrun_line(prefix: str, index: int, custom_id: str, code: str) -> bytes:
    record = {
        "id": f"batch_req_{prefix}{index:06x}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": _UNRUN_MESSAGES[code]},
    }
    return orjson.dumps(record)
