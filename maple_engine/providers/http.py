"""The one place that builds httpx clients and retries provider control calls politely."""

import functools
import logging
import random
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

import httpx
import orjson
import tenacity

from maple_engine.errors import (
    AuthError,
    BreakerOpen,
    ConfigError,
    ProviderError,
    QuotaExhausted,
    SetupRefused,
)
from maple_engine.providers.gateways import gateway_exception
from maple_engine.settings import knob

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_RETRY_AFTER_S = 60.0
# Control calls that retry say so here (a Dagster run shows it in its log; `maple` on stderr).
log = logging.getLogger("maple.provider")
RETRY_LOG_EVERY_S = 30.0  # one line when an episode starts, then at most one per 30 s
#: Answers after which a create (an upload, a batch) may have been done: the provider may have
#: made and billed it before the answer was lost (a gateway's 500 after the upstream answered).
MAYBE_DONE_STATUS = frozenset({408, 500, 502, 503, 504, 529})
#: Transport errors raised before a request reached the server: nothing was done.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
#: ``made()``: what a create whose answer was lost made, looked up at the provider by the names
#: and metadata the create gave it (the object its answer would have held), or None.
Lookup = Callable[[], dict[str, Any] | None]
#: How many of the newest uploads or batches a lookup reads.
LOOKUP_DEPTH = 500


def make_client(
    base_url: str,
    headers: dict[str, str],
    timeout_s: float,
    transport: httpx.BaseTransport | None = None,
    params: dict[str, str] | None = None,
) -> httpx.Client:
    """An httpx client with explicit timeouts (connect is short; reads may stream files);
    ``params`` go in the query of every call (an API version Azure takes there)."""
    timeout = httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))
    return httpx.Client(
        base_url=base_url.rstrip("/"),
        headers=headers,
        params=params,
        timeout=timeout,
        transport=transport,
        verify=_tls_context(),
    )


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context per process, built as httpx builds its default (certifi, or SSL_CERT_FILE
    / SSL_CERT_DIR): building one loads the CA bundle (~10-30 ms) and control calls make a
    client per call."""
    return httpx.create_ssl_context()


#: how long an answer asks a client to wait, in seconds (None: it does not say)
WaitOf = Callable[[httpx.Response], float | None]


def retry_after_seconds(response: httpx.Response | None) -> float | None:
    """The server's requested wait, from ``retry-after-ms`` or ``retry-after`` (seconds); a
    provider with its own way of saying it reads that in its own folder."""
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value:
            try:
                return min(MAX_RETRY_AFTER_S, max(0.0, float(value) * scale))
            except ValueError:
                continue
    return None


def backoff_seconds(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter."""
    return float(random.uniform(0, min(cap, base * 2**attempt)))


def error_detail(response: httpx.Response) -> tuple[str, str | None, str | None]:
    """(message, code, type) from an OpenAI or Anthropic error envelope."""
    try:
        body: Any = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return response.text[:300], None, None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        said = body.get("message") if isinstance(body, dict) else None  # a gateway's own shape
        return (said if isinstance(said, str) and said else response.text[:300]), None, None
    return str(error.get("message", "")), error.get("code"), error.get("type")


#: Error codes that say the job's setup is wrong, not the row: every request would get them.
SETUP_CODES = frozenset(
    {
        "invalid_api_key",
        "model_not_found",
        "unknown_parameter",
        "unsupported_parameter",
        "unsupported_value",
        "unsupported_response_format",
    }
)
_SETUP_WORDS = re.compile(
    r"(header|field)\b.{0,60}\brequired|\bunknown model\b"
    r"|\bmodel\b.{0,80}\b(does not exist|not found)"
    r"|\bunsupported parameter\b|\bunrecognized request argument|\bresponse_format\b",
    re.IGNORECASE,
)


def setup_refusal(response: httpx.Response) -> bool:
    """Does this refusal concern the job's setup rather than the row: a refused key (401, 403),
    an unknown path or model (404), or a 400/422 naming a header or body field a gateway
    requires, the model, a parameter or the response format? (A row's own 400, a prompt too
    long, says otherwise.)"""
    status = response.status_code
    if status in {401, 403, 404}:
        return True
    if status not in {400, 422}:
        return False
    message, code, _ = error_detail(response)
    return code in SETUP_CODES or names_the_setup(message)


def names_the_setup(message: str) -> bool:
    """Does an error message name a header or body field a gateway requires, the model, a
    parameter or the response format?"""
    return _SETUP_WORDS.search(message) is not None


def masked_url(url: str) -> str:
    """``url`` as it may be shown: a user name and password, and each query value, as ``***``."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    if parts.username is not None or parts.password is not None:
        netloc = f"***@{netloc}"
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = "&".join(f"{name}=***" for name, _ in pairs)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def check_base_url(url: str, where: str) -> None:
    """Refuse a base URL that would send something other than the user meant: one holding a
    user name or password (the provider's key is what Maple sends, never the URL's), or a query
    or fragment (each call's path goes after the base URL, so it would land inside them).
    ``where`` names the setting (e.g. "OPENAI_BASE_URL (or --base-url)")."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise ConfigError(f"{where} is not a URL ({masked_url(url)!r})") from None
    shown = masked_url(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ConfigError(f"{where} must be an http:// or https:// URL with a host, not {shown!r}.")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(
            f"{where} holds a user name or password ({shown}): Maple authenticates with the "
            "provider's API key variable, never with a URL's credentials; remove them from the "
            "URL (a gateway's own credential goes in --header)."
        )
    if parts.query or parts.fragment:
        raise ConfigError(
            f"{where} has a query string or fragment ({shown}): each call's path is added "
            "after the base URL, so it would land inside it; remove it (a key goes in the API "
            "key variable, a gateway's parameter in --header)."
        )


def safe_url(url: str) -> str:
    """``url`` without what may hold a secret: user info and the query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def is_quota_error(response: httpx.Response) -> bool:
    _, code, error_type = error_detail(response)
    return "insufficient_quota" in {code, error_type} or error_type == "billing_error"


OUTAGE_ENV = "MAPLE_OUTAGE_WINDOW_S"
DEFAULT_OUTAGE_WINDOW_S = 1800.0
OUTAGE_BACKOFF_CAP_S = 15.0


def outage_window_s() -> float:
    """How long control calls keep retrying through a provider outage (default 30 minutes)."""
    return float(knob(OUTAGE_ENV) or DEFAULT_OUTAGE_WINDOW_S)


def _idempotent(method: str, url: str) -> bool:
    """Calls that are safe to repeat for as long as an outage lasts: reads, and cancels."""
    return method in {"GET", "HEAD", "DELETE"} or url.rstrip("/").endswith("/cancel")


def request(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    what: str,
    max_retries: int = 5,
    wait_of: WaitOf = retry_after_seconds,
    result_file: bool = False,
    made: Lookup | None = None,
    window_s: float | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """Send a control call, retrying 408/409/429/5xx and transport errors with backoff.

    Idempotent calls (poll, list, download, cancel) keep retrying connection errors, timeouts
    and 5xx for the outage window (``MAPLE_OUTAGE_WINDOW_S``, default 30 minutes) instead of
    ``max_retries`` times; creates stop after ``max_retries`` (a repeated create could pay
    twice), and one that a gateway marks as its own 5xx exception is not repeated at all (it
    may have thrown after the provider did the work: `maple_engine.providers.gateways`).
    ``what`` names the call in errors (e.g. "create batch for job j shard s00001"); the
    URL in messages is the path only, so neither keys nor query secrets reach logs.
    ``result_file``: the call downloads a batch's results, which an answer that stays the same
    ends at once (`download`).

    ``window_s``: how long to keep retrying instead (0: ``max_retries`` tries only).

    ``made``: the call creates something the provider can list. After an answer that leaves it
    open whether it was done (a 5xx, a 408, a transport error once the request may have left, a
    gateway's own exception) ``made()`` looks it up before anything is sent again; what it finds
    is the call's answer (a 200 holding that object), so nothing is created or billed twice.
    """
    if window_s is not None:
        window = window_s
    else:
        window = outage_window_s() if _idempotent(method, url) else 0.0
    same = _SameAnswers(what, url) if result_file else None
    call = functools.partial(_send, client, method, url, kwargs, same)
    if made is not None:
        call = functools.partial(_looked_up, call, made, f"{what}: {method} {url}")
    return _retried(call, max_retries, window, what=what, method=method, url=url, wait_of=wait_of)


def paged_data(
    client: httpx.Client, path: str, params: dict[str, Any], *, fix: str = "check the base URL"
) -> Iterator[Any]:
    """Every item of a report's ``data`` pages (``has_more``, ``next_page`` sent as ``page``).

    The first page is tried briefly (`FIRST_CONTACT_TIMEOUT_S` a try, twice, no outage
    window): a URL that does not answer, or answers with something other than a report, is a
    `ConfigError` within seconds saying so and ``fix``; the later pages are read as any control
    call."""
    body = _first_page(client, path, params, fix)
    while True:
        yield from body.get("data") or []
        page = body.get("next_page")
        if not body.get("has_more") or not page:
            return
        query = params | {"page": page}
        body = request(client, "GET", path, what=f"read {path}", params=query).json()


#: How long a first call waits for an answer: a URL that does not answer within it is a setting
#: to fix, said within seconds (a job's other calls wait their client's longer timeout).
FIRST_CONTACT_TIMEOUT_S = 10.0
FIRST_TIMEOUT = httpx.Timeout(FIRST_CONTACT_TIMEOUT_S, connect=FIRST_CONTACT_TIMEOUT_S)


def _first_page(client: httpx.Client, path: str, query: dict[str, Any], fix: str) -> Any:
    url = masked_url(f"{str(client.base_url).rstrip('/')}{path}")
    try:
        response = request(
            client, "GET", path, what=f"read {path}", params=query, max_retries=1, window_s=0.0,
            timeout=FIRST_TIMEOUT,
        )  # fmt: skip
    except (AuthError, QuotaExhausted):
        raise
    except ProviderError as exc:
        cause = exc.__cause__
        reason = f"HTTP {exc.status}" if exc.status else type(cause or exc).__name__
        raise ConfigError(f"{url} cannot be read as a usage report ({reason}): {fix}.") from exc
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict) or "data" not in body:
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        raise ConfigError(
            f"{url} does not answer like a usage report (HTTP {response.status_code}, {kind}): "
            f"{fix}."
        )
    return body


def first_contact(
    client: httpx.Client,
    path: str,
    *,
    params: dict[str, Any],
    api: str,
    family: str | None,
    expect: str | None = None,
    url_env: str | None = None,
) -> None:
    """One cheap authenticated GET of ``path`` before anything is uploaded, tried once within
    `FIRST_CONTACT_TIMEOUT_S`: an endpoint that never answered is a setting to fix, not an
    outage to wait out. Unreachable,
    a refused key, or an answer that is not ``api``'s JSON is a `ConfigError` naming the URL
    and the fix (``expect``: a member the answer must have); a busy service (429, 5xx) is left to
    the usual retries. ``url_env``: the base URL's variable (default ``<FAMILY>_BASE_URL``)."""
    url = masked_url(f"{str(client.base_url).rstrip('/')}{path}")
    env = (family or "").upper()
    url_env = url_env or f"{env}_BASE_URL"
    fix_url = f"check {url_env} and the network" if env else "check the base URL"
    try:
        response = client.request("GET", path, params=params, timeout=FIRST_TIMEOUT)
    except httpx.TransportError as exc:
        reason = type(exc).__name__
        raise ConfigError(f"{api} at {url} cannot be reached ({reason}): {fix_url}.") from exc
    status = response.status_code
    said = f"; it said: {error_detail(response)[0]}" if status >= 400 else ""
    if status in {401, 403}:
        fix_key = f"check {env}_API_KEY" if env else "check the API key"
        raise ConfigError(f"{api} at {url} refused the API key ({status}): {fix_key}{said}.")
    if status == 429 or status >= 500:
        return
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    try:
        body = orjson.loads(response.content) if status < 400 else None
    except orjson.JSONDecodeError:
        body = None
    if 400 <= status < 500 and said and setup_refusal(response):
        raise ConfigError(
            f"{api} at {url} refused the first call (HTTP {status}){said}: fix what it names "
            "(a header a gateway requires, the model, a parameter), then rerun."
        )
    if not isinstance(body, dict) or (expect is not None and expect not in body):
        raise ConfigError(
            f"{url} does not answer like {api} (HTTP {status}, {kind}): "
            f"{fix_url} (it must point at the API, e.g. ending in /v1){said}."
        )


def download(
    client: httpx.Client,
    url: str,
    into: IO[bytes],
    *,
    what: str,
    max_retries: int = 5,
    wait_of: WaitOf = retry_after_seconds,
) -> None:
    """GET ``url`` streamed into the file ``into``, retried as `request` retries a GET (the
    file starts over on each try). A result file never sits in memory whole: a 50k-line
    OpenAI output file is ~40 MB, and ``Response.content`` briefly held it twice.

    An unreachable provider is waited out for the outage window; an answer that stays the
    same (status and body, ``SAME_ANSWERS`` times in a row, with no ``retry-after``) is a
    server or gateway that cannot serve the file, and ends the download at once."""
    same = _SameAnswers(what, url)

    def fetch() -> httpx.Response:
        into.seek(0)
        into.truncate()
        with client.stream("GET", url) as response:
            if response.status_code >= 300:
                response.read()  # an error envelope: small
                same.check(response)
                return _retryable(response)
            for chunk in response.iter_bytes():  # as they arrive: re-chunking copies twice
                into.write(chunk)
            return response

    _retried(
        fetch, max_retries, outage_window_s(), what=what, method="GET", url=url, wait_of=wait_of
    )
    into.flush()


SAME_ANSWERS = 8  # the same failed answer this many times in a row (about 20 s) is no outage;
# fewer would end a download of a provider failing a quarter of its calls at random (0.25**5)


class _SameAnswers:
    """Counts a call's identical failed answers in a row; raises once there are too many."""

    def __init__(self, what: str, url: str) -> None:
        self.what, self.url = what, url
        self.last: tuple[int, bytes] | None = None
        self.count = 0

    def check(self, response: httpx.Response) -> None:
        answer = (response.status_code, response.content)
        self.count = self.count + 1 if answer == self.last else 1
        self.last = answer
        waits = response.status_code == 429 or retry_after_seconds(response) is not None
        if self.count < SAME_ANSWERS or waits:
            return
        message, _, _ = error_detail(response)
        gateway = gateway_exception(response)
        fix = gateway or "The provider or a gateway before it cannot serve the file: fix it"
        raise BreakerOpen(  # a stop (exit 4), as the real-time breaker's: nothing is lost
            f"{self.what}: GET {self.url} answered {response.status_code} the same way "
            f"{self.count} times in a row: {message}. {fix}, then rerun the same command (the "
            "batch is adopted and downloaded, nothing is sent again).",
            response.status_code,
        )


def _retried(
    call: Callable[[], httpx.Response],
    max_retries: int,
    window: float,
    *,
    what: str,
    method: str,
    url: str,
    wait_of: WaitOf = retry_after_seconds,
) -> httpx.Response:
    """``call`` under `control_retrying`; errors name the call, the last answer is checked."""
    started = time.monotonic()
    say = _retry_logger(f"{what}: {method} {url}")
    try:
        response = control_retrying(max_retries, window, started, say, wait_of)(call)
    except httpx.TransportError as exc:
        raise ProviderError(f"{what}: {method} {url} failed: {exc!r}{_for(started)}") from exc
    except Retryable as exc:  # retries used up: report the last answer
        response = exc.response
    return _checked(response, what, method, url)


class Retryable(Exception):
    """A 408/409/429/5xx answer worth sending again (after its ``retry-after``, if any)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _send(
    client: httpx.Client,
    method: str,
    url: str,
    kwargs: dict[str, Any],
    same: "_SameAnswers | None" = None,
) -> httpx.Response:
    response = client.request(method, url, **kwargs)
    if same is not None and response.status_code >= 300:
        same.check(response)
    if not _idempotent(method, url) and gateway_exception(response) is not None:
        return response  # done upstream, maybe (a batch created): not sent again
    return _retryable(response)


def _looked_up(call: Callable[[], httpx.Response], made: Lookup, what: str) -> httpx.Response:
    """``call``, or what it made when its answer leaves that open (`request`'s ``made``)."""
    try:
        response = call()
    except httpx.TransportError as exc:
        if isinstance(exc, NOT_SENT):
            raise
        found = _found(made, what, repr(exc))
        if found is None:
            raise
        return found
    except Retryable as exc:
        if exc.response.status_code not in MAYBE_DONE_STATUS:
            raise  # a 409 or a 429: refused, nothing done
        found = _found(made, what, str(exc.response.status_code))
        if found is None:
            raise
        return found
    if gateway_exception(response) is not None:  # not sent again: done upstream, maybe
        return _found(made, what, str(response.status_code)) or response
    return response


def _found(made: Lookup, what: str, answer: str) -> httpx.Response | None:
    """``made()`` as the call's answer, saying so; None when nothing was made."""
    found = made()
    if found is None:
        log.warning("%s answered %s; nothing was made, so it is sent again", what, answer)
        return None
    name = found.get("id") or found.get("name") or "it"
    said = "%s answered %s, but the provider had done it (%s): not sent again"
    log.warning(said, what, answer, name)
    return httpx.Response(200, json=found)


def _retryable(response: httpx.Response) -> httpx.Response:
    """``response``, or `Retryable` when it is worth sending again (not a quota refusal)."""
    quota = response.status_code == 429 and is_quota_error(response)
    if response.status_code in RETRYABLE_STATUS and not quota:
        raise Retryable(response)
    return response


def control_retrying(
    max_retries: int,
    window: float,
    started: float,
    before_sleep: Callable[[tenacity.RetryCallState], None] | None = None,
    wait_of: WaitOf = retry_after_seconds,
) -> tenacity.Retrying:
    """The one retry policy of control calls: transport errors and retryable answers are sent
    again with jittered exponential backoff (or the answer's ``retry-after``), up to
    ``max_retries`` retries, or for as long as ``window`` seconds since ``started`` allow;
    ``before_sleep`` hears of each retry."""

    def stop(state: tenacity.RetryCallState) -> bool:
        retries = state.attempt_number - 1
        return not (retries < max_retries or time.monotonic() - started < window)

    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, Retryable):
            after = wait_of(error.response)
            if after is not None:
                return after
        return backoff_seconds(state.attempt_number - 1, cap=OUTAGE_BACKOFF_CAP_S)

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception_type((httpx.TransportError, Retryable)),
        stop=stop,
        wait=wait,
        sleep=time.sleep,  # looked up per call: tests may patch time.sleep
        before_sleep=before_sleep,
        reraise=True,
    )


def _retry_logger(call: str) -> Callable[[tenacity.RetryCallState], None]:
    """A ``before_sleep`` hook that logs one warning when ``call`` starts retrying and then at
    most one every ``RETRY_LOG_EVERY_S``: what failed, since when, how many tries, next try."""
    since = datetime.now(UTC)
    last = {"at": -RETRY_LOG_EVERY_S}

    def say(state: tenacity.RetryCallState) -> None:
        now = time.monotonic()
        if now - last["at"] < RETRY_LOG_EVERY_S:
            return
        last["at"] = now
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, Retryable):
            answer = f"answered {error.response.status_code}"
        else:
            answer = f"failed ({type(error).__name__})"
        wait = state.upcoming_sleep
        log.warning(
            "provider call retrying: %s %s since %s UTC, %d tries, next try in %.1f s",
            call,
            answer,
            since.strftime("%H:%M:%S"),
            state.attempt_number,
            wait,
            extra={"maple_call": call, "maple_since": since.isoformat(), "maple_next_s": wait},
        )

    return say


def _checked(response: httpx.Response, what: str, method: str, url: str) -> httpx.Response:
    if response.status_code < 400:
        return response
    message, _, _ = error_detail(response)
    if response.status_code == 429 and is_quota_error(response):
        raise QuotaExhausted(f"{what}: the provider reports insufficient quota: {message}")
    detail = f"{what}: {method} {url} answered {response.status_code}: {message}"
    gateway = gateway_exception(response)
    if gateway is not None:
        detail = f"{detail}. {gateway}"
    if response.status_code in {401, 403}:
        raise AuthError(f"{detail}. Check the API key.", response.status_code)
    if response.status_code in {400, 422} and setup_refusal(response):  # a gateway's, say
        raise SetupRefused(detail, response.status_code)
    raise ProviderError(detail, response.status_code)


def _for(started: float) -> str:
    elapsed = time.monotonic() - started
    if elapsed < 60:
        return ""
    return f" (retried for {elapsed / 60:.1f} min; {OUTAGE_ENV} sets how long)"
