"""One real-time shard attempt's requests, sent concurrently.

Workers pull rows; each send waits for a slot in the adaptive ``Gate`` (bounded in-flight
requests) and for its turn from the ``Pacer`` (RPM/TPM), rounded up to a send grid (0.2 s or
less: at most 5 requests per point, a fifth of a learned window or less) so that the requests
of one step leave on one event-loop wake (`maple_engine.send.turns`: booked a group at a time,
released together by one timer; paced one by one, each request cost a wake of its own).
It posts the already-encoded body (no re-parsing) with aiohttp, whose client costs a fraction
of httpx's CPU per request (docs/architecture.md, "Real-time sending"); the rare non-200
answer is wrapped as an ``httpx.Response`` for the shared error helpers.
A provider may send several rows in one request (an embeddings call of many inputs: its
``requests_of`` groups them, ``parse_group`` splits the answer into their rows); pacing, retries
and failures then apply to the request, and each of its rows is checkpointed.
Answers are classified into rows; retryable ones (429, 5xx/529, timeouts) are sent again after
``retry-after`` or jittered exponential backoff, up to ``max_attempts`` sends and never past the
row's retry budget (`maple_engine.policy.SendBudget`: 1 + its class's retries in all, earlier
attempts included). The same status and body twice in a row for the same request, with no other
request served in between, is no transient fault: the row fails with that answer and is not
resent (a provider serving other requests meanwhile, Gemini's identical 500 bodies among them,
is having a passing fault). A 5xx that a gateway marks as its own exception
(`maple_engine.providers.gateways`) is never resent: the gateway may have thrown after the
provider answered and billed. The first retry is said on stderr (the ``maple.provider`` log) at
once, then at most every 30 s. Every finished row goes to the checkpoints at once.

A job stopped while its attempt sends (``maple cancel``, or any stop record: ``stopped()``,
looked at every second) releases no further request and retries none: the requests in flight
finish and are checkpointed, the rest are left unsent, as a cancelled batch leaves the rows it
did not run, and a rerun sends them.

Job errors are not row outcomes (`maple_engine.send.contact`): a refusal of the job's setup
(`maple_engine.providers.http.setup_refusal`: the key, a header a gateway requires, the model,
a parameter) at any time, or two different requests failing the same way at first contact,
raises `SetupRefused` (a 4xx, or a message naming the setup) or `BreakerOpen` (anything else);
so does the breaker once sending. The rows failed before the first success are held, not
checkpointed, until one succeeds: a job stopped for its setup leaves every row to send again.
"""

import _thread
import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx
import orjson

from maple_engine.errors import AuthError, BreakerOpen, MapleError, ReplyMismatch, SetupRefused
from maple_engine.failures import FailureClass
from maple_engine.ledger.pricing import DEFAULT_OUTPUT_ESTIMATE, STANDARD_TIER, estimate_tokens
from maple_engine.policy import SendBudget
from maple_engine.providers.base import failed_row
from maple_engine.providers.gateways import gateway_exception
from maple_engine.providers.http import (
    OUTAGE_BACKOFF_CAP_S,
    RETRY_LOG_EVERY_S,
    backoff_seconds,
    error_detail,
    log,
    names_the_setup,
    outage_window_s,
    safe_url,
    setup_refusal,
)
from maple_engine.providers.realtime import Group, RateLimits, Row
from maple_engine.providers.reply_fit import ANY_REPLY, FitWatch, ReplyFit
from maple_engine.send.checkpoints import RowCheckpoints
from maple_engine.send.contact import (
    WINDOW,
    Breaker,
    Failure,
    FirstContact,
    failure_of,
    unserved,
    waited_out,
)
from maple_engine.send.drain import DRAIN, DRAIN_S
from maple_engine.send.pacing import (
    CapacityProbe,
    Gate,
    Pacer,
    TokenEstimator,
    needed_concurrency,
)
from maple_engine.send.rate_shares import Share
from maple_engine.send.turns import Turns
from maple_engine.send.window_budget import FAST

if TYPE_CHECKING:  # aiohttp loads when a real-time attempt runs, not with the CLI
    import aiohttp
    from multidict import CIMultiDictProxy

T = TypeVar("T")
_JSON = {"content-type": "application/json"}
TICK_S = 0.25  # how often checkpoints and the rate share's beat are looked at
STOP_CHECK_S = 1.0  # how often the job's stop record is looked at while sending
CAPACITY_BACKOFF_CAP_S = 60.0  # the longest wait between sends after 429s of capacity


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
    def request_headers(self) -> dict[str, str]: ...
    def resolved_base_url(self) -> str: ...
    def url_of(self, path: str) -> str: ...
    def requests_of(self, rows: list[tuple[str, str]]) -> tuple[str, list[Group]]:
        """The API path of these rows' requests, and the requests (one row each, or several)."""
        ...

    def parse_group(self, custom_ids: tuple[str, ...], body: dict[str, Any]) -> list[Row]:
        """One row per custom id from a 200 answer."""
        ...

    def classify(self, response: httpx.Response) -> tuple[str, str]: ...

    def forbidden_row(self, response: httpx.Response) -> tuple[str, str] | None: ...

    def read_limits(self, headers: Mapping[str, str], now_epoch: float) -> RateLimits: ...
    def retry_wait(self, response: httpx.Response) -> float | None: ...

    def served_tier(self, headers: Mapping[str, str]) -> str | None: ...

    def shed_fallback(self, body: str) -> str | None: ...


class _Retry(Exception):
    """A send that may be retried: its failure class, message and the server's wait;
    ``answer``: the status and body it was answered with (None: no answer); ``capacity``: a
    429 that no exhausted limit of ours explains (flex without capacity, a busy server)."""

    def __init__(
        self,
        failure_class: str,
        message: str,
        wait: float | None,
        answer: tuple[int, bytes] | None = None,
        capacity: bool = False,
    ) -> None:
        super().__init__(message)
        self.failure_class = failure_class
        self.wait = wait
        self.answer = answer
        self.capacity = capacity

    @property
    def failure(self) -> Failure:
        return failure_of(self.failure_class, str(self))


class _Outage:
    """A request's run of answers saying the service did not serve it (`unserved`): resent
    with backoff for up to the outage window from the first, outside the row's budget."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.tries = 0

    def rides_out(self) -> bool:
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        self.tries += 1
        return now - self.since < outage_window_s()

    def wait(self, asked: float | None) -> float:
        return _resend_after(asked, backoff_seconds(self.tries - 1, cap=OUTAGE_BACKOFF_CAP_S))


def _resend_after(asked: float | None, backoff: float) -> float:
    """The wait before a request is sent again: the server's (``asked``) or ``backoff``,
    whichever is longer, plus up to 50 ms of jitter, so that requests failed together are not
    all sent again together."""
    return max(asked or 0.0, backoff) + backoff_seconds(0, base=0.05)


class AttemptRun:
    """One attempt's requests: workers, pacing, adaptive concurrency, checkpointing."""

    def __init__(
        self,
        provider: Sender,
        checkpoints: RowCheckpoints,
        batch_id: str,
        share: Share | None = None,
        sending: threading.Event | None = None,
        *,
        budget: SendBudget | None = None,
        stopped: Callable[[], bool] | None = None,
        fit: ReplyFit = ANY_REPLY,
    ):
        self.p = provider
        self.fit = FitWatch(fit)  # what the job's replies must be
        self.budget = budget
        self.stopped = stopped
        self.halted = False  # the job stopped: nothing more is released or retried
        self.job_error: MapleError | None = None  # found while sending: raised once drained
        self._draining_since: float | None = None  # stopped with requests maybe in flight
        self._stop_checked_at = -math.inf
        self.sending = sending  # set once the provider answers the attempt's first request
        self.share = share
        self.checkpoints = checkpoints
        self.batch_id = batch_id
        self.pacer = Pacer(provider.rpm, provider.tpm)
        self.tokens = TokenEstimator(DEFAULT_OUTPUT_ESTIMATE)
        self.gate = Gate(provider.initial_concurrency, provider.max_concurrency)
        self.capacity = CapacityProbe()  # the bound while no limits are known
        self.turns: Turns[tuple[str, ...]] = Turns(
            self.pacer,
            self.tokens.estimate,
            lambda: self.halted,
            self._going,
            self.checkpoints.unbilled,  # said sending, held back by a pause: unsent
        )
        self.latency = 0.5
        self.url = ""
        self.successes = 0
        self.quota_message: str | None = None
        self._beat_at = -math.inf
        self._adapt_at = -math.inf
        self._transport_error: type[Exception] = OSError  # aiohttp's ClientError once it runs
        # first contact: one request at a time until one succeeds; failed rows held till then
        self.contact = FirstContact()
        self.breaker = Breaker()
        self.held: list[Row] = []
        self.retried = 0
        self._said_at = -math.inf
        self._since = ""

    async def run(self, rows: list[tuple[str, str]]) -> None:
        if not rows:
            return
        import aiohttp

        self._transport_error = aiohttp.ClientError
        path, groups = self.p.requests_of(rows)
        queue = iter(groups)
        self.pacer.left = len(groups)
        self.url = self.p.url_of(path)
        timeout = aiohttp.ClientTimeout(total=self.p.timeout_s, connect=min(10.0, self.p.timeout_s))
        connector = aiohttp.TCPConnector(limit=self.p.max_concurrency)
        headers = self.p.request_headers() | _JSON
        async with aiohttp.ClientSession(
            headers=headers, timeout=timeout, connector=connector, raise_for_status=False
        ) as client:
            workers = min(len(groups), self.p.max_concurrency)
            await self._join()
            try:
                with DRAIN.sending():
                    async with asyncio.TaskGroup() as group:
                        ticker = group.create_task(self._tick())
                        tasks = [
                            group.create_task(self._worker(client, queue)) for _ in range(workers)
                        ]
                        await asyncio.gather(*tasks)
                        await self._release()  # no success, each failure its own: the rows' own
                        ticker.cancel()
            except* (SetupRefused, BreakerOpen, ReplyMismatch) as errors:  # AuthError too
                raise errors.exceptions[0] from None
            finally:
                if self.share is not None:
                    with contextlib.suppress(MapleError, OSError):  # else it expires by itself
                        await asyncio.to_thread(self.share.leave)
        if self.job_error is not None:  # the requests in flight answered and kept: now stop
            raise self.job_error
        if DRAIN.requested.is_set():
            _interrupt()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(min(TICK_S, self.p.checkpoint_seconds))
            if self.checkpoints.due():
                self.checkpoints.flush()
            if DRAIN.requested.is_set() and self._draining_since is None:
                self._drain()
            if self._draining_since is not None and self._drained_too_long():
                self.checkpoints.flush()
                if self.job_error is not None:
                    raise self.job_error
                _interrupt()
            await self._share()
            await self._check_stop()

    def _going(self, requests: list[tuple[str, ...]]) -> None:
        """A group of requests released together: said sending in one log line first."""
        self.checkpoints.sending([custom_id for ids in requests for custom_id in ids])

    def _drain(self) -> None:
        """Send nothing more; the requests in flight end as they are answered."""
        self.halted = True
        if self._draining_since is None:
            self._draining_since = time.monotonic()

    def _drained_too_long(self) -> bool:
        assert self._draining_since is not None
        return time.monotonic() - self._draining_since > DRAIN_S

    async def _stop_for(self, error: MapleError) -> None:
        """A job error: nothing more is sent, the requests in flight are answered and kept,
        then ``error`` is raised (the first one found)."""
        if self.job_error is None:
            self.job_error = error
        self._drain()
        await self.contact.release()  # the requests waiting for first contact: none is sent

    async def _check_stop(self) -> None:
        now = time.monotonic()
        if self.stopped is None or self.halted or now - self._stop_checked_at < STOP_CHECK_S:
            return
        self._stop_checked_at = now
        with contextlib.suppress(MapleError, OSError):  # looked at again a second later
            self.halted = await asyncio.to_thread(self.stopped)

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
            if self.halted:
                return
            try:
                rows = await self._request(client, custom_ids, body)
                self._check_fit(rows)
            except (SetupRefused, BreakerOpen, ReplyMismatch) as error:  # AuthError too
                await self._stop_for(error)
                return
            if self.contact.released:
                for row in rows:
                    self.checkpoints.add(row)
            else:
                self.held.extend(rows)

    async def _request(
        self, client: "aiohttp.ClientSession", custom_ids: tuple[str, ...], body: str
    ) -> list[Row]:
        first = await self.contact.turn()
        rows, failure = await self._sends(client, custom_ids, body)
        if first:
            alike = await self.contact.answered(failure)
            if failure is not None and alike is not None:
                raise self._job_error(failure, alike)
            if self.contact.released:
                self._flush_held()
        return rows

    async def _sends(
        self, client: "aiohttp.ClientSession", custom_ids: tuple[str, ...], body: str
    ) -> tuple[list[Row], Failure | None]:
        """Send one request until it is answered for good, within the row's budget: its rows
        and, when it failed, how."""
        raw = estimate_tokens(body)
        sends, previous, served = 0, None, self.successes
        outage = _Outage()
        lane_sends = 0  # sends made before the request moved to the next lane (flex shed)
        while True:
            if self.halted or DRAIN.requested.is_set():  # stopped before it went (again): unsent
                return [], None
            if self.quota_message is not None:
                return self._rows(custom_ids, [_quota(self.quota_message)], sends), None
            try:
                rows, failure = await self._send(client, custom_ids, body, raw)
            except _Retry as retry:
                if unserved(retry.failure) and outage.rides_out():  # not billed: not counted
                    self._say_retrying(retry)
                    await asyncio.sleep(outage.wait(retry.wait))
                    continue
                sends += 1
                self._watch(retry.failure, retry.failure_class)
                # the same answer twice, and no other request served meanwhile: no passing fault
                # (an outage answers the same until it passes: its sends are within the budget)
                same = retry.answer is not None and retry.answer == previous
                same = same and not waited_out(retry.failure)
                if same and self.successes == served:
                    message = f"not resent: the same answer twice in a row: {retry}"
                    failed = failed_row(None, retry.failure_class, message, resendable=False)
                    return self._rows(custom_ids, [failed], sends), retry.failure
                previous, served = retry.answer, self.successes
                if sends - lane_sends >= self._sends_allowed(retry.failure_class, custom_ids):
                    fallback = self.p.shed_fallback(body) if retry.capacity else None
                    if fallback is not None and not lane_sends:  # shed: the next lane takes it
                        log.warning(
                            "%s: shed %d time(s); sent at standard: %s", self.p.name, sends, retry
                        )
                        body, lane_sends = fallback, sends
                        continue
                    failed = failed_row(None, retry.failure_class, f"{retry} (after {sends} sends)")
                    return self._rows(custom_ids, [failed], sends), retry.failure
                self._say_retrying(retry)
                await asyncio.sleep(self._retry_wait(retry, sends, custom_ids))
                continue
            if not rows:  # halted in `_send` before it went
                return [], None
            sends += 1
            self._watch(failure, None)
            if lane_sends:  # answered in the next lane: at the standard tier, as billed
                rows = [{"served_tier": STANDARD_TIER, **row} for row in rows]
            return self._rows(custom_ids, rows, sends), failure

    def _retry_wait(self, retry: _Retry, sends: int, custom_ids: tuple[str, ...]) -> float:
        """How long a request waits before it is sent again: the server's wait where it names
        one, else exponential backoff. A 429 of capacity backs off exponentially over the
        row's sends in all its attempts, the server's wait only a floor, so a provider without
        capacity (flex) is asked less and less often, at most once a minute per request,
        instead of as often as its short retry-after allows."""
        if retry.capacity:
            before = self.budget.sends_before(custom_ids) if self.budget is not None else 0
            backoff = backoff_seconds(before + sends - 1, cap=CAPACITY_BACKOFF_CAP_S)
            return _resend_after(retry.wait, backoff)
        if retry.wait is not None:
            return _resend_after(retry.wait, 0.0)
        return _resend_after(None, backoff_seconds(sends - 1, cap=20.0))

    def _sends_allowed(self, failure_class: str, custom_ids: tuple[str, ...]) -> int:
        """How many sends this attempt may spend on a request that failed with ``failure_class``."""
        if self.budget is None:
            return self.p.max_attempts
        return min(
            self.budget.sends_left(failure_class, custom_id, self.p.max_attempts)
            for custom_id in custom_ids
        )

    # -- first contact and the breaker (`maple_engine.send.contact`) ----------------------
    async def _release(self) -> None:
        await self.contact.release()
        self._flush_held()

    def _check_fit(self, rows: list[Row]) -> None:
        """Stop at the first reply that cannot fit the job, keeping none of it (the rerun after
        the fix sends its rows)."""
        reason = self.fit.stop_reason(rows)
        if reason is not None:
            raise ReplyMismatch(f"{self.p.name}: POST {safe_url(self.url)}: {reason}.")

    def _flush_held(self) -> None:
        for row in self.held if not self.halted else []:  # stopped: sent again on the rerun
            self.checkpoints.add(row)
        self.held = []

    def _job_error(self, failure: Failure, count: int) -> BreakerOpen | SetupRefused:
        failure_class, message = failure
        where = f"{self.p.name}: POST {safe_url(self.url)}"
        # a server that fails on a response format it does not take (llama.cpp answers 500)
        if failure_class == FailureClass.INVALID_REQUEST.value or names_the_setup(message):
            return SetupRefused(
                f"{where} refused {count} different requests the same way ({message}) before "
                "any succeeded: the job's setup is wrong, not the rows. Nothing more is sent "
                "and no row is failed for it: fix what the message names, then rerun."
            )
        unanswered = message.startswith(("transport", "timed out"))
        fix = (
            "the base URL, the network and the timeout"
            if unanswered
            else "the provider or the gateway before it"
        )
        return BreakerOpen(
            f"{where} failed {count} different requests the same way ({message}) before any "
            f"succeeded; stopped sending before spending more. Check {fix}, then rerun the "
            "same command."
        )

    def _watch(self, failure: Failure | None, retry_class: str | None) -> None:
        """Count the send in the breaker's window; raise when it opens."""
        rate_limited = retry_class == FailureClass.RATE_LIMITED.value
        same = self.breaker.watch(failure, rate_limited, armed=self.contact.released)
        if failure is not None and same is not None:
            raise BreakerOpen(
                f"{self.p.name}: {same} of the last {WINDOW} requests to {safe_url(self.url)} "
                f"failed the same way ({failure[1]}); stopped sending before spending more. "
                "Fix the provider or the gateway before it, then rerun the same command."
            )

    def _say_retrying(self, retry: _Retry) -> None:
        """One line when requests start retrying, then at most one every 30 s."""
        self.retried += 1
        now = time.monotonic()
        if not self._since:
            self._since = datetime.now(UTC).strftime("%H:%M:%S")
        if now - self._said_at < RETRY_LOG_EVERY_S:
            return
        self._said_at = now
        log.warning(
            "real-time requests retrying: POST %s %s since %s UTC, %d retries so far",
            safe_url(self.url),
            retry,
            self._since,
            self.retried,
        )

    def _rows(self, custom_ids: tuple[str, ...], rows: list[Row], sends: int) -> list[Row]:
        """One row per custom id: the answer's own, or one outcome copied to each."""
        if len(rows) != len(custom_ids):
            rows = [dict(rows[0]) for _ in custom_ids]
        for custom_id, row in zip(custom_ids, rows, strict=True):
            row["custom_id"] = custom_id
            row["batch_id"] = self.batch_id
            row["sends"] = sends
        return rows

    async def _send(
        self, client: "aiohttp.ClientSession", custom_ids: tuple[str, ...], body: str, raw: int
    ) -> tuple[list[Row], Failure | None]:
        await self.gate.acquire()
        try:
            # released with its group, the group said sending in the log (`_going`): a kill
            # from then on leaves it billed, its answer lost
            if not await self.turns.take(raw, custom_ids):  # the job stopped first: unsent
                return [], None
            # the job stopped, or the quota was found spent, while it waited for its turn
            if self.halted or self.quota_message is not None:
                self.checkpoints.unbilled(custom_ids)  # unsent after all
                return [] if self.halted else [_quota(str(self.quota_message))], None
            started = time.monotonic()
            try:
                async with client.post(self.url, data=body.encode()) as answer:
                    if self.sending is not None:  # the provider has it: its answer has begun
                        self.sending.set()
                        self.sending = None  # told once
                    content = await answer.read()
                    status, headers = answer.status, answer.headers
            except TimeoutError as exc:
                self.checkpoints.unbilled(custom_ids)
                self._overloaded()
                raise _Retry(FailureClass.SERVER_ERROR.value, "timed out", None) from exc
            except self._transport_error as exc:
                self.checkpoints.unbilled(custom_ids)
                message = f"transport: {type(exc).__name__}"
                raise _Retry(FailureClass.SERVER_ERROR.value, message, None) from exc
            if status != 200:
                self.checkpoints.unbilled(custom_ids)
            self.latency = 0.8 * self.latency + 0.2 * (time.monotonic() - started)
        finally:
            self.gate.release()
        self.pacer.learn(self.p.read_limits(headers, time.time()), time.monotonic(), started)
        self._adapt(raw, status == 200)
        if status == 200:
            rows = self._succeeded(custom_ids, content, raw)
            tier = self.p.served_tier(headers)
            return ([{**row, "served_tier": tier} for row in rows] if tier else rows), None
        row = self._outcome(self._response(status, headers, content), custom_ids[0])
        failure = (str(row["failure_class"]), str(row["error"]))
        return [row], None if row["failure_class"] == FailureClass.INSUFFICIENT_QUOTA else failure

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
            answer = (200, content)
            raise _Retry(FailureClass.SERVER_ERROR.value, message, None, answer) from exc
        billed = sum(
            int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0) for row in rows
        )
        self.tokens.observe(raw, billed)
        self.successes += 1
        self.pacer.recover()
        return rows

    def _outcome(self, response: httpx.Response, custom_id: str) -> Row:
        status = response.status_code
        where = f"{self.p.name}: POST {safe_url(self.url)} answered {status}"
        if status in {401, 403}:
            if (row := self.p.forbidden_row(response)) is not None:
                return failed_row(custom_id, *row)
            message, _, _ = error_detail(response)
            raise AuthError(f"{where}: {message}. Check the API key.", status)
        if setup_refusal(response):
            message, _, _ = error_detail(response)
            raise SetupRefused(
                f"{where}: {message}. That is the job's setup (the model, a parameter, a "
                "header a gateway requires), not the row: nothing more is sent and no row is "
                "failed for it; fix it, then rerun.",
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
            capacity = not self._rate_limited(response, wait)
            raise _Retry(FailureClass.RATE_LIMITED.value, f"429: {message}", wait, None, capacity)
        gateway = gateway_exception(response)
        if gateway is not None:  # the provider may have answered and billed: never resent
            error = f"not resent: {status}: {message}. {gateway}."
            return failed_row(custom_id, FailureClass.SERVER_ERROR.value, error, resendable=False)
        if status in {408, 409, 500, 502, 503, 504, 529}:
            if status in {503, 529}:
                self._overloaded()
            answer = (status, response.content)
            raise _Retry(FailureClass.SERVER_ERROR.value, f"{status}: {message}", wait, answer)
        return failed_row(custom_id, failure_class, f"{status}: {message}")

    def _rate_limited(self, response: httpx.Response, wait: float | None) -> bool:
        """Pause and slow the pacer for a 429; is it one of our limits, spent (its reset the
        right wait)?"""
        limits = self.p.read_limits(response.headers, time.time())
        exhausted = 0 in {limits.remaining_requests, limits.remaining_tokens}
        unknown = limits.remaining_requests is None and limits.remaining_tokens is None
        if exhausted or unknown:
            self.pacer.pause(wait if wait is not None else 1.0, time.monotonic())
            self.pacer.slow_down(time.monotonic())
            self._overloaded()
        return exhausted

    def _overloaded(self) -> None:
        """Halve the in-flight bound where no rate limits are known (a server's capacity)."""
        if not self.pacer.known:
            self.gate.resize(self.capacity.overloaded(self.gate.limit))

    def _adapt(self, raw: int, answered: bool) -> None:
        """Grow the in-flight bound to what the paced rate needs at the observed latency
        (once the limits are known, looked at every ``TICK_S``, not at every answer); without
        limits, climb to the server's throughput knee (`CapacityProbe`, answers only)."""
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
        elif answered:
            found = self.capacity.answered(self.gate.limit, time.monotonic())
            if found is None:
                return
            target = found
        else:
            return
        self.gate.resize(target)


def _quota(message: str) -> Row:
    return failed_row(None, FailureClass.INSUFFICIENT_QUOTA.value, message)


def _interrupt() -> None:
    """Stop the command as a Ctrl-C does, once a drain kept what was in flight: raised here on
    the main thread, delivered to it from another (the early start's)."""
    if threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt
    _thread.interrupt_main()


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
