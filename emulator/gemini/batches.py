"""Gemini Batch API state: uploaded files, batches and their lazy lifecycle.

With ``B = batch_seconds`` a batch is ``BATCH_STATE_PENDING`` for its first ``0.1 B``, then
``BATCH_STATE_RUNNING`` until ``created + B``, then ``BATCH_STATE_SUCCEEDED`` with its results
(inline, or a ``files/batch-...`` responses file for file input). A batch drawn by the
``expired`` fault ends ``BATCH_STATE_EXPIRED`` with no output; a cancelled one ends
``BATCH_STATE_CANCELLED`` (after ``0.1 B``) with the results of the requests run by the cancel.
An input file with an unreadable line ends ``BATCH_STATE_FAILED`` with an ``error`` Status.
An embedding batch (``asyncBatchEmbedContent``: ``EmbedContentRequest`` lines) runs each line
through the embedding engine; its inline results are ``inlinedEmbedContentResponses``.
"""

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from emulator.core.faults import billing_key, bytes_key, canonical
from emulator.core.line_fates import LineFates
from emulator.core.prompt_cache import CacheUse, gemini_usage
from emulator.gemini.engine import GeminiEngine, error_status

BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"
EMBED_BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.EmbedContentBatch"
EMBED_OUTPUT_TYPE = (
    "type.googleapis.com/google.ai.generativelanguage.v1main.EmbedContentBatchOutput"
)
EMBED = "embed"  # the kind of a batch created by asyncBatchEmbedContent
FILE_RETENTION_SECONDS = 48 * 3600


def timestamp(epoch: float) -> str:
    """RFC 3339 with nanosecond-style fraction and ``Z``, as Google's JSON mapping writes it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class GeminiFile:
    """A file of the Files API; its bytes live on disk."""

    name: str
    display_name: str
    mime_type: str
    size: int
    created: float
    path: Path
    source: str = "UPLOADED"
    retention_s: float = FILE_RETENTION_SECONDS

    @property
    def expires(self) -> float:
        return self.created + self.retention_s

    def as_json(self, base_url: str) -> dict[str, Any]:
        base = base_url.rstrip("/")
        body: dict[str, Any] = {
            "name": self.name,
            "displayName": self.display_name,
            "mimeType": self.mime_type,
            "sizeBytes": str(self.size),
            "createTime": timestamp(self.created),
            "updateTime": timestamp(self.created),
            "expirationTime": timestamp(self.expires),
            "uri": f"{base}/v1beta/{self.name}",
            "state": "ACTIVE",
            "source": self.source,
        }
        if self.source == "GENERATED":
            body["downloadUri"] = f"{base}/download/v1beta/{self.name}:download?alt=media"
        return body


@dataclass
class Upload:
    """A resumable upload session (``X-Goog-Upload-Protocol: resumable``)."""

    display_name: str
    mime_type: str
    size: int
    path: Path
    received: int = 0
    name: str = ""  # the name asked for at start; "": one is made at finalize


@dataclass(eq=False)
class GeminiBatch:
    """One batch: its requests (key, request) until it ends, then its outcome."""

    name: str
    model: str
    display_name: str
    created: float
    seconds: float
    expire: bool
    inline: bool
    requests: list[tuple[str, dict[str, Any]]] | None
    total: int
    error: str | None = None
    cancel_at: float | None = None
    state: str = "BATCH_STATE_PENDING"
    ended_at: float | None = None
    output: dict[str, Any] | None = None
    org: str = ""  # the API key that created it: whose prompt cache its requests use
    kind: str = "generate"  # or EMBED
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    priority: int = 0  # ``batch.priority``: higher goes first among the batches waiting
    started: float | None = None  # when it began running; None: waits for a slot

    def done_by(self, moment: float) -> int:
        if self.started is None:
            return 0
        if self.seconds <= 0:
            return self.total
        return int(min(1.0, max(0.0, (moment - self.started) / self.seconds)) * self.total)

    @property
    def waiting(self) -> bool:
        return self.started is None and self.ended_at is None and self.cancel_at is None


class GeminiStore:
    """Files, upload sessions and batches of the Gemini surface."""

    def __init__(self) -> None:
        self.files: dict[str, GeminiFile] = {}
        self.uploads: dict[str, Upload] = {}
        self.batches: dict[str, GeminiBatch] = {}
        self.lock = threading.RLock()

    def file(self, name: str, now: float) -> GeminiFile | None:
        """The file ``name`` unless deleted; one past its ``expirationTime`` is deleted now,
        as Google deletes a file 48 hours after its upload."""
        with self.lock:
            stored = self.files.get(name)
            if stored is None or stored.expires > now:
                return stored
            del self.files[name]
        stored.path.unlink(missing_ok=True)
        return None


def read_file_requests(path: Path) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """The ``{"key", "request"}`` lines of an input file, or the reason it is unreadable."""
    requests: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return [], f"Line {number} of the input file is not valid JSON."
        key, request = line.get("key"), line.get("request")
        if not isinstance(key, str) or not isinstance(request, dict):
            return [], f'Line {number} of the input file needs a "key" and a "request" object.'
        if key in seen:
            return [], f"Line {number} of the input file repeats the key {key!r}."
        seen.add(key)
        requests.append((key, request))
    if not requests:
        return [], "The input file holds no requests."
    return requests, None


def advance(engine: GeminiEngine, batch: GeminiBatch, now: float, sink: "Sink") -> None:
    """Move ``batch`` to where it is at ``now``; run its requests when it ends."""
    with batch.lock:
        if batch.ended_at is not None:
            return
        if batch.cancel_at is not None:
            settle = batch.cancel_at + 0.1 * batch.seconds
            if now >= settle:
                _finish(engine, batch, settle, batch.done_by(batch.cancel_at), sink)
                batch.state = "BATCH_STATE_CANCELLED"
            return
        if batch.started is None:  # waits for a slot (``gemini_batch_slots``)
            return
        end = batch.started + batch.seconds
        if now >= end:
            if batch.error is not None:
                batch.state, batch.ended_at, batch.requests = "BATCH_STATE_FAILED", end, None
            elif batch.expire:
                batch.state, batch.ended_at, batch.requests = "BATCH_STATE_EXPIRED", end, None
                batch.counts = {"failed": 0, "succeeded": 0}
            else:
                _finish(engine, batch, end, batch.total, sink)
                batch.state = "BATCH_STATE_SUCCEEDED"
        elif now >= batch.started + 0.1 * batch.seconds:
            batch.state = "BATCH_STATE_RUNNING"


def next_to_start(batches: list[GeminiBatch], slots: int | None) -> list[GeminiBatch]:
    """The waiting batches that start now: as many as there are free slots (all of them with
    no limit), highest ``priority`` first, then oldest."""
    running = sum(1 for b in batches if b.started is not None and b.ended_at is None)
    waiting = sorted((b for b in batches if b.waiting), key=lambda b: (-b.priority, b.created))
    return waiting if slots is None else waiting[: max(slots - running, 0)]


class Sink:
    """Where finished batches put their results file and their counters (the emulator state)."""

    def new_path(self) -> Path:
        raise NotImplementedError

    def add_result_file(self, batch: GeminiBatch, path: Path) -> str:
        raise NotImplementedError

    def account(self, stats: Counter[str], billed: list[int], kind: str) -> None:
        raise NotImplementedError

    def cached(self, org: str, model: str, request: dict[str, Any]) -> CacheUse:
        """The implicit prompt-cache use of one request, counted in the stats."""
        raise NotImplementedError

    def fates(self, batch: "GeminiBatch", ran_all: bool) -> LineFates:
        """The answered lines ``batch`` loses (only when it ``ran_all`` its requests) or
        repeats (``emulator.core.line_fates``)."""
        raise NotImplementedError


def _finish(engine: GeminiEngine, batch: GeminiBatch, at: float, done: int, sink: Sink) -> None:
    requests, batch.requests = batch.requests or [], None
    stats: Counter[str] = Counter()
    billed: list[int] = []
    results: list[dict[str, Any]] = []
    fates = sink.fates(batch, ran_all=done >= len(requests))
    lost, repeated = 0, set()
    for key, request in requests[:done]:
        body = canonical(request)
        if batch.kind == EMBED:
            outcome = engine.embed([request], bytes_key(body), grpc=True)
        else:
            outcome = engine.run(request, batch.model, bytes_key(body), grpc=True)
        if outcome.fault is not None:
            stats[f"fault_{outcome.fault}"] += 1
        copies = fates.copies() if outcome.status == 200 else 1
        if copies == 0:  # lost: counted succeeded, not billed, no line
            stats["lines_dropped"] += 1
            lost += 1
            continue
        if copies == 2:
            stats["lines_duplicated"] += 1
            repeated.add(key)
        if outcome.status == 200 and batch.kind == EMBED:
            embedded = outcome.body
            reply = {"embedding": embedded["embeddings"][0]}
            if "usageMetadata" in embedded:
                reply["usageMetadata"] = embedded["usageMetadata"]
            results.append({"key": key, "response": reply})
            billed.append(billing_key("gemini", key, body))
        elif outcome.status == 200:
            gemini_usage(outcome.body, sink.cached(batch.org, batch.model, request))
            results.append({"key": key, "response": outcome.body})
            billed.append(billing_key("gemini", key, body))
            stats["file_parts"] += outcome.file_parts
        else:
            results.append({"key": key, "error": outcome.body})
    results = [copy for r in results for copy in ([r, r] if r["key"] in repeated else [r])]
    ok = sum(1 for r in results if "response" in r) - len(repeated)
    failed = len(results) - len(repeated) - ok
    batch.counts = {"succeeded": ok + lost, "failed": failed}
    stats["requests_received"] += ok + lost + failed
    stats["batch_lines_processed"] += len(requests)
    stats["gemini_batches_ended"] += 1
    sink.account(stats, billed, "embedding" if batch.kind == EMBED else "chat")
    batch.output = _output(batch, results, sink)
    batch.ended_at = at


def _output(batch: GeminiBatch, results: list[dict[str, Any]], sink: Sink) -> dict[str, Any]:
    if batch.inline:
        inlined = []
        for item in results:
            entry = {k: v for k, v in item.items() if k != "key"}
            inlined.append({**entry, "metadata": {"key": item["key"]}})
        name = "inlinedEmbedContentResponses" if batch.kind == EMBED else "inlinedResponses"
        return {name: {"inlinedResponses": inlined}}
    path = sink.new_path()
    with path.open("wb") as handle:
        for item in results:
            handle.write(orjson.dumps(item) + b"\n")
    return {"responsesFile": sink.add_result_file(batch, path)}


def batch_json(batch: GeminiBatch) -> dict[str, Any]:
    """The batch as the REST API returns it: an Operation whose metadata is the batch."""
    now = time.time()
    pending = 0 if batch.ended_at is not None else batch.total
    stats = {
        "requestCount": str(batch.total),
        "successfulRequestCount": str(batch.counts.get("succeeded", 0)),
        "failedRequestCount": str(batch.counts.get("failed", 0)),
        "pendingRequestCount": str(pending),
    }
    embeds = batch.kind == EMBED
    metadata: dict[str, Any] = {
        "@type": EMBED_BATCH_TYPE if embeds else BATCH_TYPE,
        "name": batch.name,
        "model": batch.model,
        "displayName": batch.display_name,
        "createTime": timestamp(batch.created),
        "updateTime": timestamp(batch.ended_at or now),
        "batchStats": stats,
        "state": batch.state,
    }
    if batch.priority:
        metadata["priority"] = str(batch.priority)  # int64: a string in JSON
    body: dict[str, Any] = {"name": batch.name, "metadata": metadata}
    if batch.ended_at is not None:
        metadata["endTime"] = timestamp(batch.ended_at)
        body["done"] = True
        if batch.output is not None:
            metadata["output"] = batch.output
            body["response"] = {
                "@type": EMBED_OUTPUT_TYPE if embeds else OUTPUT_TYPE,
                **batch.output,
            }
        if batch.error is not None:
            body["error"] = error_status(400, batch.error, grpc=True)
    return body
