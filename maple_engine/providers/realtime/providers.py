"""Real-time providers' shared core: the batch interface over synchronous chat/messages calls
(each provider's wire format is its own folder's ``realtime.py``).

``submit`` runs the shard attempt's requests right away on an aiohttp session (keep-alive,
bounded and adaptive concurrency), paced to the RPM/TPM learned from the rate-limit headers (or
set explicitly), and checkpoints every finished row (``checkpoints.RowCheckpoints``). Rerunning
the same attempt after a crash sends only the rows without a checkpoint. The returned
``Submission`` has a synthetic batch id ``rt-<job>-<shard>-<attempt>``; ``poll`` reports it ended
(all rows are checkpointed by the time ``submit`` returns; rows without a checkpoint, if any,
read as "not run" and are retried), and ``results`` reads the checkpoints.

Within an attempt a request is retried on 429 (honouring ``retry-after-ms``/``retry-after``),
5xx/529 and timeouts with exponential backoff and jitter, up to ``max_attempts`` sends; then the
row is reported failed with its class and the pipeline's retry policy takes over. Quota errors
(429 ``insufficient_quota``, 402 ``billing_error``, spend limits) are not retried, and stop the
attempt from sending further rows. 401/403 abort the attempt with ``AuthError``.
"""

import threading
from typing import Any, ClassVar

import httpx
import orjson
import polars as pl
from pydantic import Field, PrivateAttr

from maple_engine.model import CHAT, REALTIME_PREFIX, BatchState, Kind, Submission
from maple_engine.providers.base import (
    BATCH_FILE_LIMITS,
    Dialect,
    PromptCaching,
    ProviderCapabilities,
    ProviderLimits,
    ProviderModel,
    ShardPayload,
)
from maple_engine.providers.realtime.checkpoints import RowCheckpoints
from maple_engine.providers.realtime.engine import AttemptRun, Group, run_sync
from maple_engine.providers.realtime.rate_shares import Share, account_digest, rate_share
from maple_engine.settings import DEFAULT_STORAGE
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

Row = dict[str, Any]
SHARD = ProviderLimits(max_requests=10_000, max_bytes=BATCH_FILE_LIMITS.max_bytes)


def realtime_capabilities(
    dialect: Dialect,
    price_family: str,
    credentials: str,
    *,
    drops_empty_system: bool = False,
    caching: PromptCaching | None = None,
    kinds: frozenset[Kind] = frozenset({CHAT}),
) -> ProviderCapabilities:
    """What every real-time provider shares: shard attempts run at once, nothing queues, and a
    rerun resumes from the row checkpoints (no orphans)."""
    return ProviderCapabilities(
        mode="realtime",
        limits=SHARD,
        dialect=dialect,
        price_families=(price_family,),
        queue="none",
        orphans="checkpoints",
        drops_empty_system=drops_empty_system,
        credentials=credentials,
        caching=caching,
        kinds=kinds,
    )


def on_tier(rows: list[tuple[str, str]], field: str, tier: str) -> list[tuple[str, str]]:
    """``rows`` with ``field: tier`` in every body: a flex provider also sends bodies encoded
    for another lane (a deadline's or a stalled batch's rows), and the provider bills
    the flex tier's prices only to requests that ask for it."""
    marked = f'"{field}":"{tier}"'
    return [(custom_id, _with(body, field, tier, marked)) for custom_id, body in rows]


def _with(body: str, field: str, tier: str, marked: str) -> str:
    if marked in body:  # encoded by the flex provider itself
        return body
    return orjson.dumps({**orjson.loads(body), field: tier}).decode()


class RealtimeProvider(ProviderModel):
    """Shared core of the real-time providers (subclasses set the wire format)."""

    name: str = Field(default="realtime", description="Provider name recorded in costs/output.")
    api_key: str | None = Field(
        default=None, repr=False, description="API key (code location: an EnvVar)."
    )
    base_url: str | None = Field(default=None, description="API base URL; default: the API's.")
    checkpoint_root: str = Field(
        default=DEFAULT_STORAGE,
        description="Storage root for row checkpoints: the job's root.",
    )
    rate_share_db: str | None = Field(
        default=None,
        repr=False,
        description="Database where runs on every host share the account's rate limit: the "
        "ledger's URL (an EnvVar: it holds a password); None: heartbeats under checkpoint_root.",
    )
    rpm: int | None = Field(default=None, description="Requests per minute; None: learn it.")
    tpm: int | None = Field(default=None, description="Tokens per minute; None: learn it.")
    max_concurrency: int = Field(default=64, description="Most requests in flight at once.")
    initial_concurrency: int = Field(
        default=4, description="Requests in flight before any rate-limit header has been seen."
    )
    max_attempts: int = Field(
        default=6, description="Sends per request within one attempt (429/5xx/timeouts)."
    )
    timeout_s: float = Field(default=120.0, description="HTTP timeout per request, seconds.")
    checkpoint_rows: int = Field(default=200, description="Rows per checkpoint chunk.")
    checkpoint_seconds: float = Field(default=2.0, description="Seconds between chunk writes.")
    max_requests: int = Field(default=SHARD.max_requests, description="Requests per shard.")
    max_bytes: int = Field(default=SHARD.max_bytes, description="Encoded bytes per shard.")

    batch_id_prefix: ClassVar[str] = REALTIME_PREFIX
    _sending: threading.Event | None = PrivateAttr(default=None)

    # -- wire format (subclasses) -----------------------------------------------------------
    def endpoint(self) -> str:
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def resolved_base_url(self) -> str:
        raise NotImplementedError

    def parse_body(self, custom_id: str, body: dict[str, Any]) -> Row:
        raise NotImplementedError

    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """One request per row, to ``endpoint()`` (a provider may group rows instead)."""
        return self.endpoint(), [((custom_id,), body) for custom_id, body in rows]

    def parse_group(self, custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[Row]:
        return [self.parse_body(custom_ids[0], body)]

    def classify(self, response: httpx.Response) -> tuple[str, str]:
        raise NotImplementedError

    # -- the provider interface -------------------------------------------------------------
    @property
    def provider_name(self) -> str:
        return self.name

    def limits(self) -> ProviderLimits:
        return ProviderLimits(self.max_requests, self.max_bytes)

    def check_credentials(self) -> None:
        self.auth_headers()

    def tell_sending(self, event: threading.Event | None) -> None:
        """Set ``event`` when a request of this provider's next attempts leaves (None: stop)."""
        self._sending = event

    def close(self) -> None:
        """Nothing kept open: each attempt opens and closes its own connections."""

    def line_bytes_expr(self, custom_id: pl.Expr, request: pl.Expr) -> pl.Expr:
        return request.str.len_bytes()

    def encode(self, requests: pl.DataFrame) -> bytes:
        """The attempt's request bodies, one a line (what its content hash is taken over)."""
        return ("\n".join(requests["request"].to_list()) + "\n").encode()

    def _checkpoints(self, job: str, shard: str, attempt: int) -> RowCheckpoints:
        return RowCheckpoints(
            Storage(self.checkpoint_root),
            JobLayout(job).checkpoints(shard, attempt),
            self.checkpoint_rows,
            self.checkpoint_seconds,
        )

    def _share(self, model: str) -> Share:
        """This run's share of the account's limit for ``model``, among every live sender."""
        headers = repr(sorted(self.auth_headers().items()))
        account = account_digest(self.resolved_base_url(), headers)
        return rate_share(self.rate_share_db, self.checkpoint_root, self.name, account, model)

    def submit(self, payload: ShardPayload) -> Submission:
        checkpoints = self._checkpoints(payload.job, payload.shard, payload.attempt)
        batch_id = f"{self.batch_id_prefix}{payload.job}-{payload.shard}-{payload.attempt}"
        done = checkpoints.open()
        todo = payload.requests.filter(~pl.col("custom_id").is_in(list(done)))
        rows = list(zip(todo["custom_id"].to_list(), todo["request"].to_list(), strict=True))
        try:
            share = self._share(payload.model)
            run_sync(AttemptRun(self, checkpoints, batch_id, share, self._sending).run(rows))
        finally:
            checkpoints.close()
        return payload.submission(self.name, batch_id, "")

    def poll(self, submissions: list[Submission]) -> dict[str, BatchState]:
        states = {}
        for sub in submissions:
            count = self._checkpoints(sub.job, sub.shard, sub.attempt).count()
            status = "completed" if count >= sub.request_count else "incomplete"
            states[sub.batch_id] = BatchState(
                sub.batch_id, status, ended=True, completed=count, total=sub.request_count
            )
        return states

    def results(self, submission: Submission, state: BatchState) -> pl.DataFrame:
        sub = submission
        return self._checkpoints(sub.job, sub.shard, sub.attempt).load()

    def check_endpoint(self) -> None:
        """Nothing here: the first request's answer tells (a dead endpoint fails its rows)."""

    def cancel(self, submission: Submission) -> None:
        """Nothing runs after ``submit`` returns; a killed run simply stops sending."""

    def find_orphans(self, job: str) -> list[Submission]:
        """Never any: a rerun of an unrecorded attempt resumes from its checkpoints instead."""
        return []
