"""One real-time shard attempt's requests, sent concurrently.

Workers pull rows; each send waits for a slot in the adaptive ``Gate`` (bounded in-flight
requests) and for its turn from the ``Pacer`` (RPM/TPM), rounded up to a send grid (0.2 s or
less: at most 5 requests per point, a fifth of a learned window or less) so that the requests
of one step leave on one event-loop wake (paced one by one, each request cost a wake of its
own: twice the CPU). It posts the already-encoded body (no re-parsing) with aiohttp, whose
client costs a fraction of httpx's CPU per request (docs/architecture.md, "Real-time sending");
the rare non-200 answer is wrapped as an ``httpx.Response`` for the shared error helpers.
A provider may send several rows in one request (an embeddings call of many inputs: its
``requests_of`` groups them, ``parse_group`` splits the answer into their rows); pacing, retries
and failures then apply to the request, and each of its rows is checkpointed.
Answers are classified into rows; retryable ones (429, 5xx/529, timeouts) are sent again after
``retry-after`` or jittered exponential backoff, up to ``max_attempts``. Every finished row goes
to the checkpoints at once.
"""

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx
import orjson

from maple_engine.errors import AuthError, MapleError
from maple_engine.failures import FailureClass
from maple_engine.ledger.pricing import DEFAULT_OUTPUT_ESTIMATE, estimate_tokens
from maple_engine.providers.base import failed_row
from maple_engine.providers.http import backoff_seconds, error_detail
from maple_engine.providers.realtime import Group, RateLimits, Row
from maple_engine.send.checkpoints import RowCheckpoints
from maple_engine.send.pacing import Gate, Pacer, TokenEstimator, needed_concurrency
from maple_engine.send.rate_shares import Share
from maple_engine.send.window_budget import FAST

if TYPE_CHECKING:  # aiohttp loads when a real-time attempt runs, not with the CLI
    import aiohttp
    from multidict import CIMultiDictProxy

T = TypeVar("T")
_JSON = {"content-type": "application/json"}
TICK_S = 0.25  # how often checkpoints and the rate share's beat are looked at


class Sender(Protocol):
    """What the engine needs of a real-time provider: where and how to send, how to read the
    answers, and its limits (``maple_engine.providers.realtime.RealtimeProvider`` is
    one)."""

    @property
    def name(self) -> str: ...
    @property
    def rpm(self) -> int | None: ...
    @property
    def tpm(self) -> int | None: ...
    @property
    def initial_concurrency(self) -> int: ...
    @property
    def max_concurrency(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def checkpoint_seconds(self) -> float: ...
    def endpoint(self) -> str: ...
    def auth_headers(self) -> dict[str, str]: ...
    def resolved_base_url(self) -> str: ...
    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """The API path of these rows' requests, and the requests (one row each, or several)."""
        ...

    def parse_group(self, custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[Row]:
        """One row per custom id from a 200 answer."""
        ...

    def classify(self, response: httpx.Response) -> tuple[str, str]: ...
    def read_limits(self, headers: Mapping[str, str], now_epoch: float) -> RateLimits: ...
    def retry_wait(self, response: httpx.Response) -> float | None: ...


class _Retry(Exception):
    """A send that may be retried: its failure class, message and the server's wait."""

    def __init__(self, failure_class: str, message: str, wait: float | None) -> None:
        super().__init__(message)
        self.failure_class = failure_class
        self.wait = wait


class AttemptRun:
    """One attempt's requests: workers, pacing, adaptive concurrency, checkpointing."""

    def __init__(
        self,
        provider: Sender,
        checkpoints: RowCheckpoints,
        batch_id: str,
        share: Share | None = None,
        sending: threading.Event | None = None,
    ):
        self.p = provider
        self.sending = sending  # set once the provider answers the attempt's first request
        self.share = share
        self.checkpoints = checkpoints
        self.batch_id = batch_id
        self.pacer = Pacer(provider.rpm, provider.tpm)
        self.tokens = TokenEstimator(DEFAULT_OUTPUT_ESTIMATE)
        self.gate = Gate(provider.initial_concurrency, provider.max_concurrency)
        self.turn = asyncio.Lock()  # one pacing reservation at a time
        self.latency = 0.5
        self.url = ""
        self.successes = 0
        self.quota_message: str | None = None
        self._beat_at = -math.inf
        self._adapt_at = -math.inf
        self._transport_error: type[Exception] = OSError  # aiohttp's ClientError once it runs

    async def run(self, rows: list[tuple[str, str]]) -> None:
        if not rows:
            return
        import aiohttp

        self._transport_error = aiohttp.ClientError
        path, groups = self.p.requests_of(rows)
        queue = iter(groups)
        self.pacer.left = len(groups)
        self.url = self.p.resolved_base_url().rstrip("/") + path
        timeout = aiohttp.ClientTimeout(total=self.p.timeout_s, connect=min(10.0, self.p.timeout_s))
        connector = aiohttp.TCPConnector(limit=self.p.max_concurrency)
        headers = self.p.auth_headers() | _JSON
        async with aiohttp.ClientSession(
            headers=headers, timeout=timeout, connector=connector, raise_for_status=False
        ) as client:
            workers = min(len(groups), self.p.max_concurrency)
            await self._join()
            try:
                async with asyncio.TaskGroup() as group:
                    ticker = group.create_task(self._tick())
                    tasks = [group.create_task(self._worker(client, queue)) for _ in range(workers)]
                    await asyncio.gather(*tasks)
                    ticker.cancel()
            except* AuthError as errors:
                raise errors.exceptions[0] from None
            finally:
                if self.share is not None:
                    with contextlib.suppress(MapleError, OSError):  # else it expires by itself
                        await asyncio.to_thread(self.share.leave)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(min(TICK_S, self.p.checkpoint_seconds))
            if self.checkpoints.due():
                self.checkpoints.flush()
            await self._share()

    async def _join(self) -> None:
        """Take a share of the account's limit before the first send. When others already
        send, wait until they have counted this sender (``Share.counted``; a few beats at
        most): they have slowed down by then, so that together the senders never pace to more
        than the limit, and the limit is not left idle longer than that."""
        await self._share()
        if self.share is None or self.pacer.senders == 1:
            return
        deadline = time.monotonic() + 3 * self.share.beat_s + 1.0
        while time.monotonic() < deadline and not await asyncio.to_thread(self.share.counted):
            await asyncio.sleep(0.05)

    async def _share(self) -> None:
        """Pace to this process's share of the account's limit (``rate_shares``), counting
        the live senders every ``beat_s``. A beat that fails once sending has begun (the
        database or the storage out of reach for a moment) keeps the last count and is tried
        again at the next beat; the first one, before anything is sent, raises."""
        now = time.monotonic()
        if self.share is None or now - self._beat_at < self.share.beat_s:
            return
        joined, self._beat_at = self._beat_at > -math.inf, now
        try:
            self.pacer.senders, self.pacer.rank = await asyncio.to_thread(self.share.beat)
        except (MapleError, OSError):
            if not joined:
                raise

    async def _worker(self, client: "aiohttp.ClientSession", queue: Iterator[Group]) -> None:
        for custom_ids, body in queue:
            for row in await self._request(client, custom_ids, body):
                self.checkpoints.add(row)

    async def _request(
        self, client: "aiohttp.ClientSession", custom_ids: tuple[str, ...], body: str
    ) -> list[Row]:
        raw = estimate_tokens(body)
        last = _Retry(FailureClass.SERVER_ERROR.value, "not sent", None)
        for attempt in range(self.p.max_attempts):
            if self.quota_message is not None:
                return self._rows(custom_ids, [_quota(self.quota_message)])
            try:
                return self._rows(custom_ids, await self._send(client, custom_ids, body, raw))
            except _Retry as retry:
                last = retry
            if attempt + 1 < self.p.max_attempts:
                wait = last.wait if last.wait is not None else backoff_seconds(attempt, cap=20.0)
                await asyncio.sleep(wait + backoff_seconds(0, base=0.05))
        message = f"{last} (after {self.p.max_attempts} sends)"
        return self._rows(custom_ids, [failed_row(None, last.failure_class, message)])

    def _rows(self, custom_ids: tuple[str, ...], rows: list[Row]) -> list[Row]:
        """One row per custom id: the answer's own, or one outcome copied to each."""
        if len(rows) != len(custom_ids):
            rows = [dict(rows[0]) for _ in custom_ids]
        for custom_id, row in zip(custom_ids, rows, strict=True):
            row["custom_id"] = custom_id
            row["batch_id"] = self.batch_id
        return rows

    async def _send(
        self, client: "aiohttp.ClientSession", custom_ids: tuple[str, ...], body: str, raw: int
    ) -> list[Row]:
        await self.gate.acquire()
        try:
            await self._turn(raw)
            if self.quota_message is not None:  # learned while this row waited for its turn
                return [_quota(self.quota_message)]
            started = time.monotonic()
            try:
                async with client.post(self.url, data=body.encode()) as answer:
                    if self.sending is not None:  # the provider has it: its answer has begun
                        self.sending.set()
                        self.sending = None  # told once
                    content = await answer.read()
                    status, headers = answer.status, answer.headers
            except TimeoutError as exc:
                raise _Retry(FailureClass.SERVER_ERROR.value, f"timed out: {exc!r}", None) from exc
            except self._transport_error as exc:
                raise _Retry(FailureClass.SERVER_ERROR.value, f"transport: {exc!r}", None) from exc
            self.latency = 0.8 * self.latency + 0.2 * (time.monotonic() - started)
        finally:
            self.gate.release()
        self.pacer.learn(self.p.read_limits(headers, time.time()), time.monotonic(), started)
        self._adapt(raw)
        if status == 200:
            return self._succeeded(custom_ids, content, raw)
        return [self._outcome(self._response(status, headers, content), custom_ids[0])]

    async def _turn(self, raw: int) -> None:
        """Wait for this request's start slot. Slots are booked one at a time and at most one
        grid step ahead (the booker waits for its step before the next may book), so a stalled
        loop delays sends instead of bursting; the requests booked into one step all wake at
        its grid point together. A booking that an answer paused meanwhile (remaining 0, a
        429) is booked again after the pause, as a send paced one by one would have waited; so
        is a send of a budgeted window that wakes too late for it (a stalled loop), as it
        would count in the next window, which has its own budget."""
        while True:
            async with self.turn:
                now, tokens = time.monotonic(), self.tokens.estimate(raw)
                # on the grid only while pacing to a known limit that no one else contests
                grid = self.pacer.known and self.pacer.calm(now)
                go = self.pacer.book(tokens, now, grid)
                budgeted = self.pacer.budgeted
                early = go - now - (self.pacer.step(tokens) if grid else 0.0)
                if early > 0:
                    await asyncio.sleep(early)
            wait = go - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            now = time.monotonic()
            if self.pacer.paused_until <= now and (not budgeted or self.pacer.in_time(go, now)):
                return
            # an answer paused the pacer (its window is spent) after this slot was booked: a
            # slot booked a step ahead must not go out into the spent window; book again

    def _response(
        self, status: int, headers: "CIMultiDictProxy[str]", content: bytes
    ) -> httpx.Response:
        request = httpx.Request("POST", self.url)
        return httpx.Response(
            status, headers=list(headers.items()), content=content, request=request
        )

    def _succeeded(self, custom_ids: tuple[str, ...], content: bytes, raw: int) -> list[Row]:
        try:
            rows = self.p.parse_group(custom_ids, orjson.loads(content))
        except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError) as exc:
            message = f"unparseable 200 body: {exc}"
            raise _Retry(FailureClass.SERVER_ERROR.value, message, None) from exc
        billed = sum(
            int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0) for row in rows
        )
        self.tokens.observe(raw, billed)
        self.successes += 1
        self.pacer.recover()
        return rows

    def _outcome(self, response: httpx.Response, custom_id: str) -> Row:
        status = response.status_code
        if status in {401, 403}:
            message, _, _ = error_detail(response)
            raise AuthError(
                f"{self.p.name}: POST {self.p.endpoint()} answered {status}: {message}. "
                "Check the API key.",
                status,
            )
        failure_class, message = self.p.classify(response)
        if failure_class == FailureClass.INSUFFICIENT_QUOTA.value:
            self.quota_message = message
            return _quota(message)
        if status == 429 and response.headers.get("x-should-retry") == "false":
            return failed_row(custom_id, FailureClass.INVALID_REQUEST.value, f"429: {message}")
        wait = self.p.retry_wait(response)
        if status == 429:
            self._rate_limited(response, wait)
            raise _Retry(FailureClass.RATE_LIMITED.value, f"429: {message}", wait)
        if status in {408, 409, 500, 502, 503, 504, 529}:
            raise _Retry(FailureClass.SERVER_ERROR.value, f"{status}: {message}", wait)
        return failed_row(custom_id, failure_class, f"{status}: {message}")

    def _rate_limited(self, response: httpx.Response, wait: float | None) -> None:
        limits = self.p.read_limits(response.headers, time.time())
        exhausted = 0 in {limits.remaining_requests, limits.remaining_tokens}
        unknown = limits.remaining_requests is None and limits.remaining_tokens is None
        if exhausted or unknown:
            self.pacer.pause(wait if wait is not None else 1.0, time.monotonic())
            self.pacer.slow_down(time.monotonic())
            if not self.pacer.known:
                self.gate.limit = max(1, self.gate.limit // 2)

    def _adapt(self, raw: int) -> None:
        """Grow the in-flight bound to what the paced rate needs at the observed latency
        (once the limits are known, looked at every ``TICK_S``, not at every answer)."""
        if self.pacer.known:
            now = time.monotonic()
            if now < self._adapt_at:
                return
            self._adapt_at = now + TICK_S
            tokens = self.tokens.estimate(1)
            fast = self.pacer.window_capacity(tokens, now) is not None  # FAST may come
            rate = 1.0 / max(self.pacer.interval(tokens) * (FAST if fast else 1.0), 1e-3)
            step = self.pacer.step(self.tokens.estimate(raw))  # the grid of requests like this
            held = self.latency + 2 * step  # a request books a step ahead
            target = needed_concurrency(rate, held, self.p.initial_concurrency)
        elif self.successes and self.successes % (4 * self.gate.limit) == 0:
            target = self.gate.limit + 1  # no limits known: additive increase
        else:
            return
        self.gate.resize(target)


def _quota(message: str) -> Row:
    return failed_row(None, FailureClass.INSUFFICIENT_QUOTA.value, message)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion, also from code that already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[T] = []

    def target() -> None:
        result.append(asyncio.run(coro))

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return result[0]
