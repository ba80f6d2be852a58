"""An OpenAI batch as the emulator keeps it: the facts its status is computed from, and how it
ended."""

import threading
from dataclasses import dataclass, field
from typing import Any

from emulator.core.state import StoredFile
from emulator.openai.batch_lines import PassResult


@dataclass
class Final:
    """How a batch ended; fixed once computed."""

    status: str
    at: float
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    usage: dict[str, Any] | None = None


@dataclass(eq=False)
class OpenAIBatch:
    """One batch and the facts its status is computed from."""

    id: str
    endpoint: str
    input_file: StoredFile
    completion_window: str
    metadata: dict[str, str] | None
    created: float
    seconds: float
    expire: bool
    cancel_at: float | None = None
    errors: list[dict[str, Any]] | None = None
    total: int = 0
    model: str | None = None
    final: Final | None = None
    run: PassResult | None = None
    api_key: str = ""  # the key that created it (billed to its organisation)
    enqueued_tokens: int = 0  # prompt tokens counted against the enqueued-token limit
    org: str = ""  # the API key that created it: whose prompt cache its lines use
    # A Mistral batch job's model: its lines carry no method or url, and a body without a model
    # takes this one (None: an OpenAI batch, each line naming its own).
    job_model: str | None = None
    project: str | None = None  # the ``OpenAI-Project`` it was created with: billed to it
    told: bool = False  # its end's webhook event was queued
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def in_progress_at(self) -> float:
        return self.created + 0.1 * self.seconds

    @property
    def finalizing_at(self) -> float:
        return self.created + 0.9 * self.seconds

    @property
    def end(self) -> float:
        return self.created + self.seconds

    def done_by(self, moment: float) -> int:
        """How many requests had run by ``moment`` (linear over the in-progress window)."""
        if moment < self.in_progress_at or self.errors is None:
            return 0
        span = self.finalizing_at - self.in_progress_at
        fraction = 1.0 if span <= 0 else min(1.0, (moment - self.in_progress_at) / span)
        return int(fraction * self.total)
