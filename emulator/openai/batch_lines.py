"""The hot path: one pass over an OpenAI batch input file that validates and runs every line.

The pass writes the output and error files and keeps the per-line billing facts in memory; the
counters are committed only when the batch ends, so a cancel can still drop lines that had not
"run" by then. A plain chat request (no fault classes configured, no ``response_format``, no
truncation) takes a fast path that formats the output line from a template; ``test_fast_path``
checks it matches the general path byte for byte.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from emulator.core.faults import billing_key, bytes_key
from emulator.core.files import RULES, FileProblem, carries_files, files_billed
from emulator.core.line_fates import LineFates
from emulator.core.prompt_cache import CacheUse, has_openai_prefix, openai_usage
from emulator.core.tokens import content_text, count_tokens, prompt_tokens
from emulator.openai import responses as responses_api
from emulator.openai.reasoning import fast_path_ok

if TYPE_CHECKING:
    from emulator.core.state import State

MAX_REPORTED_ERRORS = 1000
CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
UNRUN_MESSAGES = {
    "batch_expired": "This request could not be executed before the completion window expired.",
    "batch_cancelled": "This request was not executed because the batch was cancelled.",
}
_FAST_TEMPLATE = (
    b'{"id":"batch_req_%b%06x","custom_id":%b,"response":{"status_code":200,'
    b'"request_id":"req_%b%06x","body":{"id":"chatcmpl-%b%06x","object":"chat.completion",'
    b'"created":%d,"model":%b,"choices":[{"index":0,"message":{"role":"assistant","content":%b,'
    b'"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":'
    b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":'
    b'{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,'
    b'"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},'
    b'"service_tier":"default","system_fingerprint":"fp_emulator"}},"error":null}'
)


def _error(code: str, message: str, line: int | None, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


@dataclass
class PassResult:
    """What one pass over an input file found and produced."""

    errors: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    model: str | None = None
    output_path: Path | None = None
    error_path: Path | None = None
    #: per successful line: (index, billing key, prompt tokens, completion tokens, of the prompt
    #: tokens those read from the prompt cache)
    ok: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    #: per failed line that ran: (index, fault class or None)
    failed: list[tuple[int, str | None]] = field(default_factory=list)
    unrun: int = 0
    #: per successful line of several embedding inputs: (index, inputs beyond the first)
    extra_units: list[tuple[int, int]] = field(default_factory=list)
    #: what its lines bill: chat requests, or embedding inputs (the batch's endpoint)
    kind: str = "chat"
    #: prompt tokens of every valid line (what OpenAI's enqueued-token limit counts)
    prompt_tokens: int = 0
    #: answered lines left out of the output (``--drop-lines``): (index, custom id); and the
    #: indexes of those written twice (``--duplicate-lines``)
    dropped: list[tuple[int, str]] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)


def _count_requests(raw_lines: list[bytes]) -> int:
    return sum(1 for raw in raw_lines if raw and not raw.isspace())


def size_problem(path: Path, max_bytes: int, max_requests: int) -> tuple[list[bytes], PassResult]:
    """Split the file into lines, reporting file-level problems (size, empty, too many)."""
    result = PassResult()
    if path.stat().st_size > max_bytes:
        limit = max_bytes // (1024 * 1024)
        result.errors.append(
            _error("file_too_large", f"The input file exceeds the {limit} MB batch limit.", None)
        )
        return [], result
    raw_lines = path.read_bytes().split(b"\n")
    result.total = _count_requests(raw_lines)
    if result.total == 0:
        result.errors.append(_error("empty_file", "The input file is empty.", None))
    elif result.total > max_requests:
        message = f"The input file has {result.total} requests; a batch allows {max_requests}."
        result.errors.append(_error("too_many_tasks", message, None))
    return raw_lines, result


class Writer:
    """Buffered JSONL writer that creates its file only when the first line arrives."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self._buffer: list[bytes] = []
        self._handle: Any = None

    def add(self, line: bytes) -> None:
        self._buffer.append(line)
        self.count += 1
        if len(self._buffer) >= 8192:
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

    def discard(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self.path.unlink(missing_ok=True)
        self._buffer.clear()


def unrun_line(prefix: str, index: int, custom_id: str, code: str) -> bytes:
    """An error-file line for a request that never ran (``response: null``)."""
    record = {
        "id": f"batch_req_{prefix}{index:06x}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": UNRUN_MESSAGES[code]},
    }
    return orjson.dumps(record)


def fast_chat(body: dict[str, Any]) -> tuple[bytes, int, int] | None:
    """(content JSON, prompt tokens, completion tokens) for a plain chat body, else None."""
    messages = body.get("messages")
    if (
        type(messages) is not list
        or not messages
        or body.get("response_format") is not None
        or body.get("stream")
        or type(body.get("model")) is not str
        or not fast_path_ok(body)
    ):
        return None
    prompt = 3
    last = ""
    for message in messages:
        if type(message) is not dict:
            return None
        content = message.get("content")
        if type(content) is not str and carries_files(content):
            return None
        text = content if type(content) is str else content_text(content)
        prompt += max(1, (len(text) + 3) // 4) + 3
        if message.get("role") == "user":
            last = text
    reply = "echo: " + last
    completion = max(1, (len(reply) + 3) // 4)
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if type(limit) is int and 0 < limit < completion:
        return None
    return orjson.dumps(reply), prompt, completion


class BatchPass:
    """Validates and runs all lines of one batch input file in a single pass."""

    def __init__(
        self,
        state: "State",
        batch_id: str,
        endpoint: str,
        org: str = "",
        line_url: str = "",
        *,
        job_model: str | None = None,
    ) -> None:
        self.state = state
        self.endpoint = endpoint
        self.line_url = line_url or endpoint  # what each line's url must say (Azure's names)
        self.org = org
        # a Mistral job's model: lines without method and url, bodies without a model take it
        self.job_model = job_model
        self.prefix = batch_id.removeprefix("batch_")

    def run(self, path: Path, *, expire: bool, created: int) -> PassResult:
        """Validate ``path``; when valid, run it (only the first half when ``expire``)."""
        config = self.state.config
        raw_lines, result = size_problem(path, config.openai_max_bytes, config.openai_max_requests)
        if result.errors:
            return result
        result.kind = "embedding" if self.endpoint == EMBEDDINGS else "chat"
        cutoff = result.total // 2 if expire else result.total
        out, err = Writer(self.state.new_path()), Writer(self.state.new_path())
        drop = 0.0 if expire else config.drop_lines  # a completed batch loses lines
        fates = LineFates(config.seed, self.prefix, drop, config.duplicate_lines)
        self._lines(raw_lines, result, cutoff=cutoff, out=(out, fates), err=err, created=created)
        if result.errors:
            out.discard()
            err.discard()
            result.ok.clear()
            result.failed.clear()
            return result
        result.output_path, result.error_path = out.close(), err.close()
        return result

    def _lines(  # noqa: PLR0912, PLR0915  (the hot loop is kept in one frame for speed)
        self,
        raw_lines: list[bytes],
        result: PassResult,
        *,
        cutoff: int,
        out: tuple[Writer, LineFates],
        err: Writer,
        created: int,
    ) -> None:
        errors, endpoint = result.errors, self.endpoint
        writer, fates = out
        lossy, copies = fates.active, fates.copies
        seen: set[str] = set()
        engine = self.state.openai
        fast = endpoint == CHAT and not engine.drawer.active and not engine.omit_usage
        prefix = self.prefix
        prefix_bytes = prefix.encode()
        loads, dumps, sort = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
        ok_append, failed_append = result.ok.append, result.failed.append
        index = -1
        line_url = None if self.job_model is not None else self.line_url
        result.model = self.job_model
        model_bytes = dumps(self.job_model) if self.job_model is not None else b""
        for number, raw in enumerate(raw_lines, 1):
            if not raw or raw.isspace():
                continue
            problem = None
            try:
                line = loads(raw)
            except orjson.JSONDecodeError:
                line = None
                problem = _error(
                    "invalid_json_line", "This line is not parseable as valid JSON.", number
                )
            if problem is None:
                problem = _line_problem(line, number, line_url, seen)
            if problem is None:
                model = line["body"].setdefault("model", self.job_model)
                if result.model is None:
                    result.model = model
                    model_bytes = dumps(model)
                elif model != result.model:
                    message = "All requests in a batch must use the same model."
                    problem = _error("model_mismatch", message, number, "body.model")
            if problem is not None:
                if len(errors) < MAX_REPORTED_ERRORS:
                    errors.append(problem)
                continue
            if errors:
                continue
            index += 1
            custom_id = line["custom_id"]
            body = line["body"]
            quick = fast_chat(body) if fast and not has_openai_prefix(body) else None
            result.prompt_tokens += quick[1] if quick is not None else line_tokens(body, endpoint)
            if index >= cutoff:
                err.add(unrun_line(prefix, index, custom_id, "batch_expired"))
                result.unrun += 1
                continue
            canonical = dumps(body, option=sort)
            key = billing_key("openai", custom_id, canonical)
            if quick is not None:
                content, prompt, completion = quick
                fast_line = _FAST_TEMPLATE % (
                    prefix_bytes,
                    index,
                    dumps(custom_id),
                    prefix_bytes,
                    index,
                    prefix_bytes,
                    index,
                    created,
                    model_bytes,
                    content,
                    prompt,
                    completion,
                    prompt + completion,
                )
                written = copies() if lossy else 1
                if _lost_or_twice(result, written, index, custom_id):
                    continue
                for _ in range(written):
                    writer.add(fast_line)
                ok_append((index, key, prompt, completion, 0))
                continue
            outcome = engine.run(endpoint, body, bytes_key(canonical))
            use = CacheUse()
            if outcome.status == 200 and has_openai_prefix(body):
                use = self.state.prompt_cache.openai(self.org, body)
                openai_usage(outcome.body, use)
                self.state.stats.cached(use)
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
            written = copies() if lossy and outcome.status == 200 else 1
            if _lost_or_twice(result, written, index, custom_id):
                continue
            if outcome.status == 200:
                for _ in range(written):
                    writer.add(dumps(record))
                tokens = (outcome.prompt_tokens, outcome.completion_tokens, use.read)
                ok_append((index, key, *tokens))
                if outcome.file_parts:
                    self.state.stats.add("file_parts", outcome.file_parts)
                if outcome.units > 1:
                    result.extra_units.append((index, outcome.units - 1))
            else:
                if self.job_model is not None:  # Mistral: the error object as a JSON string
                    error = outcome.body.get("error") or {}
                    record["response"]["body"] = dumps({"object": "error", **error}).decode()
                err.add(dumps(record))
                failed_append((index, outcome.fault))


def _lost_or_twice(result: PassResult, written: int, index: int, custom_id: str) -> bool:
    """Note an answered line written ``written`` times (0: lost, 2: twice); True when lost."""
    if written == 0:
        result.dropped.append((index, custom_id))
        return True
    if written == 2:
        result.duplicated.append(index)
    return False


def line_tokens(body: dict[str, Any], endpoint: str = CHAT) -> int:
    """Prompt tokens of one request body to ``endpoint``: chat messages (their files' tokens
    too), a Responses input, or embedding inputs."""
    messages = body.get("messages")
    if isinstance(messages, list):
        try:
            inline = files_billed(messages, RULES["openai"], fetching=False)[1]
            return prompt_tokens(messages) + inline  # enqueued: no URL fetched for it
        except FileProblem:
            return prompt_tokens(messages)  # refused when the line runs
    if endpoint == responses_api.PATH:
        return responses_api.request_prompt_tokens(body)
    items = body.get("input")
    items = items if isinstance(items, list) else [items]
    return sum(count_tokens(item) for item in items if isinstance(item, str))


def _line_problem(  # noqa: PLR0911  (one exit per rule)
    line: Any, number: int, endpoint: str | None, seen: set[str]
) -> dict[str, Any] | None:
    """The problem of one input line, or None; ``endpoint`` None: a Mistral line, which names
    no method or url (its job does)."""
    if type(line) is not dict:
        return _error("invalid_json_line", "Each line must be a JSON object.", number)
    custom_id = line.get("custom_id")
    if type(custom_id) is not str or not custom_id:
        message = "Missing required parameter: 'custom_id'."
        return _error("missing_required_parameter", message, number, "custom_id")
    if custom_id in seen:
        message = f"The custom_id '{custom_id}' is used more than once in this file."
        return _error("duplicate_custom_id", message, number, "custom_id")
    seen.add(custom_id)
    if endpoint is not None and line.get("method") != "POST":
        return _error("invalid_method", "Only the POST method is supported.", number, "method")
    if endpoint is not None and line.get("url") != endpoint:
        message = f"The url '{line.get('url')}' does not match the batch endpoint '{endpoint}'."
        return _error("url_mismatch", message, number, "url")
    if type(line.get("body")) is not dict:
        message = "Missing required parameter: 'body'."
        return _error("missing_required_parameter", message, number, "body")
    return None
