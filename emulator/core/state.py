"""Everything the emulator remembers: files on disk, batches, counters and fault attempts."""

import asyncio
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.anthropic.engine import AnthropicEngine
from emulator.bedrock.jobs import S3Access
from emulator.config import EmulatorConfig
from emulator.core.billing import Billing
from emulator.core.durations import BatchDurations
from emulator.core.faults import FaultDrawer
from emulator.core.finisher import Finisher
from emulator.core.flex import FlexTier
from emulator.core.labels import LabelRule
from emulator.core.outcome import BILLED_BY_KIND, new_id
from emulator.core.prompt_cache import CacheUse, PromptCache
from emulator.core.ratelimit import RateLimiter
from emulator.core.webhooks import WebhookSender
from emulator.gemini.batches import GeminiStore
from emulator.gemini.engine import GeminiEngine
from emulator.openai.engine import OpenAIEngine

FILE_RETENTION_SECONDS = 30 * 24 * 3600
_STAT_NAMES = (
    "files_uploaded",
    "batches_created",
    "requests_received",
    "requests_billed",
    "chat_requests_billed",
    "embedding_inputs_billed",
    "bodies_billed_twice",
    "realtime_requests",
    "realtime_429",
    "batch_lines_processed",
    "control_500",
    "max_enqueued_tokens",
    "batches_failed_token_limit",
    "anthropic_queue_429",
    "batches_stalled",
    "cache_read_tokens",
    "cache_write_tokens",
    "flex_requests",
    "flex_429",
    "priority_requests",
    "realtime_max_in_flight",
    "lines_dropped",
    "lines_duplicated",
    "file_parts",
    "batch_retrievals",
    "batch_list_pages",
    "webhooks_sent",
    "webhooks_failed",
)


@dataclass
class StoredFile:
    """An OpenAI file whose bytes live on disk under the emulator's temporary directory."""

    id: str
    filename: str
    purpose: str
    size: int
    created_at: int
    path: Path
    digest: int = 0
    project: str | None = None  # OpenAI: the project it belongs to (seen only from there)

    def as_json(self) -> dict[str, Any]:
        """The OpenAI ``file`` object, with the members Mistral's has besides (``sample_type``,
        ``source``, ``num_lines``, ``mimetype``, and ``deleted`` when one is retrieved: its SDK
        requires ``sample_type``, ``source`` and ``deleted``)."""
        expires = (
            self.created_at + FILE_RETENTION_SECONDS if self.purpose.startswith("batch") else None
        )
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.size,
            "created_at": self.created_at,
            "expires_at": expires,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
            "sample_type": self._sample_type(),
            "source": "upload" if self.purpose != "batch_output" else "mistral",
            "num_lines": None,
            "mimetype": "application/jsonl" if self.filename.endswith(".jsonl") else None,
            "deleted": False,
        }

    def _sample_type(self) -> str:
        """Mistral's ``sample_type``: a batch's input, its results or errors, else training."""
        if self.purpose == "batch_output":
            return "batch_error" if self.filename.endswith("_error.jsonl") else "batch_result"
        return "batch_request" if self.purpose == "batch" else "instruct"


class Stats:
    """Thread-safe counters plus the set of billed request keys (the paid-twice detector)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._billed: set[int] = set()
        self._twice: set[int] = set()

    def add(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name``."""
        with self._lock:
            self._counts[name] += amount

    def maximum(self, name: str, value: int) -> None:
        """Raise counter ``name`` to ``value`` if it is lower (a high-water mark)."""
        with self._lock:
            self._counts[name] = max(self._counts[name], value)

    def merge(self, counts: Counter[str]) -> None:
        """Add a batch's local counters in one step."""
        with self._lock:
            self._counts.update(counts)

    def bill(self, keys: Iterable[int], kind: str) -> None:
        """Record successful (billed) requests of ``kind`` (``chat``: one a request,
        ``embedding``: one a text embedded); a key billed before counts as paid twice."""
        with self._lock:
            billed, twice = self._billed, self._twice
            count = 0
            for key in keys:
                if key in billed:
                    twice.add(key)
                else:
                    billed.add(key)
                count += 1
            self._counts["requests_billed"] += count
            self._counts[BILLED_BY_KIND[kind]] += count
            self._counts["bodies_billed_twice"] = len(twice)

    def cached(self, use: CacheUse) -> None:
        """Count one request's prompt-cache reads and billed writes."""
        if use.read or use.write:
            with self._lock:
                self._counts["cache_read_tokens"] += use.read
                self._counts["cache_write_tokens"] += use.write

    def snapshot(self) -> dict[str, int]:
        """All counters, with the required ones present even when zero."""
        with self._lock:
            counts = dict(self._counts)
        return {name: counts.pop(name, 0) for name in _STAT_NAMES} | dict(sorted(counts.items()))


class State:
    """The emulator's whole memory; ``reset()`` drops it (``POST /_emulator/reset``)."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.root = Path(tempfile.mkdtemp(prefix="maple-emulator-"))
        self.lock = threading.RLock()
        self.finisher = Finisher()
        self.webhooks = (
            WebhookSender(config.webhook_url, config.webhook_secret, self._count)
            if config.webhook_url and config.webhook_secret
            else None
        )
        self._fresh()

    def _fresh(self) -> None:
        config = self.config
        self.files: dict[str, StoredFile] = {}
        self.openai_batches: dict[str, Any] = {}
        self.anthropic_batches: dict[str, Any] = {}
        self.stats = Stats()
        self.billing = Billing(config.organizations, config.workspaces)
        self.drawer = FaultDrawer(config.seed, config.fail)
        self.control_drawer = FaultDrawer(config.seed, {"server_error": config.control_fail_rate})
        self.openai = OpenAIEngine(
            self.drawer, config.embedding_dimensions, config.omit_usage, config.ignore_dimensions
        )
        self.openai.fetch_urls = config.fetch_urls
        self.openai.uploaded = self.uploaded_bytes
        self.anthropic = AnthropicEngine(self.drawer)
        self.anthropic.fetch_urls = config.fetch_urls
        self.gemini = GeminiStore()
        self.bedrock_jobs: dict[str, Any] = {}
        # Bedrock's OpenAI batches: the S3 input of each, and the result objects written
        self.bedrock_openai_inputs: dict[str, str] = {}
        self.bedrock_openai_written: set[str] = set()
        # OpenRouter's batches (OpenAI batches underneath), in creation order: id -> model
        self.openrouter_batches: dict[str, str] = {}
        self.s3 = S3Access(config.s3_endpoint)
        self.gemini_engine = GeminiEngine(
            self.drawer, config.embedding_dimensions, config.omit_usage
        )
        label = LabelRule(config.label_rule, config.label_noise)
        self.openai.label = self.anthropic.label = self.gemini_engine.label = label
        self.gemini_engine.fetch_urls = config.fetch_urls
        self.gemini_engine.uploaded = self.gemini_upload
        self.limiter = RateLimiter(config.rpm, config.tpm, config.burst_seconds, config.limiter)
        self.durations = BatchDurations(config, self.stats)
        self.prompt_cache = PromptCache()
        self.flex = FlexTier(config.seed, config.flex_unavailable)
        self.gemini_priority_served = 0  # Gemini priority requests served at priority
        self.latency = random.Random(config.seed)
        self.in_flight = 0  # real-time answers being worked on or waiting for a server slot
        self.slots: asyncio.Semaphore | None = None  # made on the serving loop (server_slots)

    def _count(self, name: str) -> None:
        self.stats.add(name)  # the stats of now: ``reset`` replaces them

    def reset(self) -> None:
        """Forget every file, batch, counter and attempt."""
        with self.lock:
            self.finisher.clear()  # forgotten batches must not be processed (and billed) later
            shutil.rmtree(self.root, ignore_errors=True)
            self.root.mkdir(parents=True, exist_ok=True)
            self._fresh()

    def close(self) -> None:
        """Stop the finisher and webhook threads and delete the temporary directory."""
        self.finisher.stop()
        if self.webhooks is not None:
            self.webhooks.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def new_path(self, suffix: str = ".jsonl") -> Path:
        """A fresh path under the emulator's directory."""
        return self.root / f"{new_id('f')}{suffix}"

    def add_file(
        self, filename: str, purpose: str, path: Path, digest: int = 0, project: str | None = None
    ) -> StoredFile:
        """Register bytes already written at ``path`` as a file of ``project``."""
        stored = StoredFile(
            id=new_id("file-"),
            filename=filename,
            purpose=purpose,
            size=path.stat().st_size,
            created_at=int(time.time()),
            path=path,
            digest=digest,
            project=project,
        )
        with self.lock:
            self.files[stored.id] = stored
        return stored

    def gemini_upload(self, uri: str) -> bytes | None:
        """The bytes of the Gemini file a ``fileData`` part names (its ``uri``, ending in
        ``files/<id>``), None when it names none uploaded here."""
        name = "files/" + uri.rsplit("files/", 1)[-1] if "files/" in uri else ""
        stored = self.gemini.file(name, time.time())
        return stored.path.read_bytes() if stored is not None else None

    def uploaded_bytes(self, file_id: str) -> bytes | None:
        """The bytes of the file ``file_id`` uploaded for use in requests (purpose
        ``user_data``, ``assistants`` or ``vision``), None when there is none."""
        with self.lock:
            stored = self.files.get(file_id)
        if stored is None or stored.purpose not in ("user_data", "assistants", "vision"):
            return None
        return stored.path.read_bytes()

    def delete_file(self, file_id: str) -> bool:
        """Remove a file; False when it does not exist."""
        with self.lock:
            stored = self.files.pop(file_id, None)
        if stored is None:
            return False
        stored.path.unlink(missing_ok=True)
        return True
