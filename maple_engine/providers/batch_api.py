"""What the batch providers share: the resource basics, JSON-lines encoding of already-encoded
request bodies, and the list/get/poll/cancel calls of a REST batches collection (OpenAI's
``/batches``, Anthropic's ``/v1/messages/batches`` and Mistral's ``/batch/jobs`` have the same
shape; the last pages by number instead of by cursor)."""

import contextlib
import dataclasses
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol

import httpx
import polars as pl

from maple_engine.model import BatchState, Submission
from maple_engine.providers.base import (
    ProviderCapabilities,
    ProviderLimits,
    json_string_expr,
    poll_batches,
)
from maple_engine.providers.http import first_contact, request
from maple_engine.providers.lost import fetch_or_lost, ignore_missing

LIST_PAGE = 100


class _Named(Protocol):
    name: str


class _Limited(Protocol):
    max_requests: int
    max_bytes: int


class _Clients(Protocol):
    _http: httpx.Client | None

    def _new_client(self) -> httpx.Client: ...


_CLIENT_LOCK = threading.Lock()


def _kept_client(owner: _Clients) -> httpx.Client:
    """``owner``'s client, made on first use. It is closed by ``close()`` (at the end of a
    Dagster run), or when ``owner`` is garbage-collected (a provider used outside Dagster: the
    CLI's cancel, status and dry run)."""
    with _CLIENT_LOCK:
        client = owner._http
        if client is None or client.is_closed:
            client = owner._new_client()
            owner._http = client
            weakref.finalize(owner, client.close)
        return client


def _close_client(owner: _Clients) -> None:
    with _CLIENT_LOCK:
        client, owner._http = owner._http, None
    if client is not None:
        client.close()


class BatchProviderBasics:
    """``provider_name`` and ``limits`` of a batch provider resource whose fields are
    ``name``, ``max_requests`` and ``max_bytes``; and, for those with a private ``_http`` and a
    ``_new_client()``, one HTTP client kept for the resource's life (connections reused by every
    poll, list, upload and download of a run), closed by ``close()``."""

    @contextlib.contextmanager
    def _client(self: _Clients) -> Iterator[httpx.Client]:
        yield _kept_client(self)

    def close(self: _Clients) -> None:
        """Close the kept HTTP client (made again if the provider is used later)."""
        _close_client(self)

    @property
    def provider_name(self: _Named) -> str:
        return self.name

    def limits(self: _Limited) -> ProviderLimits:
        return ProviderLimits(self.max_requests, self.max_bytes)


class _RestBatches(Protocol):
    capabilities: ClassVar[ProviderCapabilities]

    def _client(self) -> contextlib.AbstractContextManager[httpx.Client]: ...

    def _batches(self) -> "BatchCollection": ...

    def _state(self, batch: dict[str, Any]) -> BatchState: ...


class RestBatchCalls:
    """``poll`` and ``cancel`` of a provider whose batches are a `BatchCollection`."""

    def poll(self: _RestBatches, submissions: list[Submission]) -> dict[str, BatchState]:
        with self._client() as client:
            return self._batches().poll(client, submissions, self._state)

    def cancel(self: _RestBatches, submission: Submission) -> None:
        with self._client() as client:
            self._batches().cancel(client, submission.batch_id)

    def check_endpoint(self: _RestBatches) -> None:
        """List one batch: the key, the URL and the API are checked before any upload."""
        batches = self._batches()
        with self._client() as client:
            first_contact(
                client,
                batches.path,
                params=batches.probe_params,
                api=f"the {batches.noun} API",
                family=self.capabilities.credentials,
                expect="data",
                url_env=self.capabilities.variable("base_url"),
            )


# -- JSON lines of already-encoded requests ---------------------------------------------------
def _wrapped(requests: pl.DataFrame, head: str, mid: str, end: str) -> pl.Series:
    return requests.select(
        pl.concat_str(
            [
                pl.lit(head),
                json_string_expr(pl.col("custom_id")),
                pl.lit(mid),
                pl.col("request"),
                pl.lit(end),
            ]
        )
    ).to_series()


def wrapped_requests(requests: pl.DataFrame, head: str, mid: str) -> list[str]:
    """``{head}"<custom_id>"{mid}<request>}`` for every row (``custom_id``, ``request``)."""
    return list(_wrapped(requests, head, mid, "}").to_list())


def jsonl(requests: pl.DataFrame, head: str, mid: str) -> bytes:
    """The wrapped requests as a JSON-lines file, joined by polars (no Python string per row)."""
    return str(_wrapped(requests, head, mid, "}\n").str.join("").item()).encode()


def wrapped_bytes_expr(custom_id: pl.Expr, request: pl.Expr, head: str, mid: str) -> pl.Expr:
    """The encoded size of each wrapped request, with its separator (newline or comma)."""
    fixed = len(head) + len(mid) + 1 + 1  # closing brace and the separator
    return json_string_expr(custom_id).str.len_bytes() + request.str.len_bytes() + fixed


# -- a REST batches collection ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BatchCollection:
    """``path`` lists batches (newest first), ``path/<id>`` gets one, and ``path/<id>/cancel``
    cancels it; ``noun`` names a batch in error messages. A listing pages by the cursor
    ``after_param`` (``limit`` items a page), or, with ``numbered``, by page number (``page``
    from 0, ``page_size`` items a page, ``total`` items in all)."""

    path: str
    noun: str
    after_param: str
    max_retries: int
    numbered: bool = False

    @property
    def probe_params(self) -> dict[str, Any]:
        """The query of a one-item listing (the first contact's)."""
        return {"page_size": 1} if self.numbered else {"limit": 1}

    def listing(
        self, client: httpx.Client, filters: dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every batch, newest first; ``filters`` narrow the listing where the API takes them."""
        after: str | None = None
        number = 0
        while True:
            params: dict[str, Any] = dict(filters or {})
            if self.numbered:
                params |= {"page": number, "page_size": LIST_PAGE}
            else:
                params["limit"] = LIST_PAGE
                if after:
                    params[self.after_param] = after
            page = request(
                client,
                "GET",
                self.path,
                what=f"list {self.noun}{'es' if self.noun.endswith('ch') else 's'}",
                params=params,
                max_retries=self.max_retries,
            ).json()
            data = page.get("data") or []
            yield from data
            number += 1
            if not data or not self._more(page, number):
                return
            after = page.get("last_id") or data[-1]["id"]

    def _more(self, page: dict[str, Any], pages_read: int) -> bool:
        if self.numbered:
            total = page.get("total")
            full = len(page["data"]) >= LIST_PAGE
            return full and (total is None or pages_read * LIST_PAGE < int(total))
        return bool(page.get("has_more"))

    def get(self, client: httpx.Client, batch_id: str) -> dict[str, Any]:
        got = request(
            client,
            "GET",
            f"{self.path}/{batch_id}",
            what=f"poll {self.noun} {batch_id}",
            max_retries=self.max_retries,
        )
        return dict(got.json())

    def poll(
        self,
        client: httpx.Client,
        submissions: list[Submission],
        state_of: Callable[[dict[str, Any]], BatchState],
    ) -> dict[str, BatchState]:
        return poll_batches(
            {s.batch_id for s in submissions},
            lambda: self.listing(client),
            lambda batch_id: fetch_or_lost(
                lambda b: self.get(client, b), lambda: self.listing(client), batch_id
            ),
            state_of,
        )

    def cancel(self, client: httpx.Client, batch_id: str) -> None:
        ignore_missing(
            lambda: request(
                client,
                "POST",
                f"{self.path}/{batch_id}/cancel",
                what=f"cancel {self.noun} {batch_id}",
                max_retries=self.max_retries,
            )
        )
