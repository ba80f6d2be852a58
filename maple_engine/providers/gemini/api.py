"""Gemini API control calls over httpx: Files API resumable upload, get and delete, batch list
and get."""

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson

from maple_engine.durations import duration_seconds
from maple_engine.errors import ProviderError
from maple_engine.providers import http
from maple_engine.providers.gemini.wire import API_VERSION
from maple_engine.providers.http import MAX_RETRY_AFTER_S, retry_after_seconds


def retry_wait(response: httpx.Response) -> float | None:
    """The wait a Google API asks for: ``retry-after``, or on a 429 the
    ``google.rpc.RetryInfo.retryDelay`` (e.g. ``"13s"``) in the error details."""
    standard = retry_after_seconds(response)
    if standard is not None or response.status_code != 429:
        return standard
    try:
        details = orjson.loads(response.content)["error"]["details"]
        for detail in details:
            if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
                delay = duration_seconds(str(detail["retryDelay"]))
                return None if delay is None else min(MAX_RETRY_AFTER_S, max(0.0, delay))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    return None


def request(client: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A control call to a Google API (`maple_engine.providers.http.request`, waiting as
    Google asks)."""
    return http.request(client, method, url, wait_of=retry_wait, **kwargs)


CHUNK = 8 * 1024 * 1024
LIST_PAGE = 100


def upload_file(client: httpx.Client, data: bytes, label: str, what: str, retries: int) -> str:
    """A batch's JSONL uploaded by the Files API: its name (``files/...``)."""
    meta = {"displayName": label}
    return str(resumable_upload(client, data, meta, "application/jsonl", what, retries)["name"])


def resumable_upload(  # noqa: PLR0917  (the bytes, what they are, and how to send them)
    client: httpx.Client,
    data: bytes,
    meta: dict[str, str],
    mime: str,
    what: str,
    retries: int,
    made: Callable[[], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Files API resumable upload (https://ai.google.dev/api/files#method:-media.upload):
    start a session for the ``File`` ``meta``, then send the bytes in chunks; the ``File``
    made. ``made``: the file this upload makes, looked up where the last chunk's answer is
    lost (a file named by its caller)."""
    start = request(
        client,
        "POST",
        f"/upload/{API_VERSION}/files",
        what=f"start upload for {what}",
        max_retries=retries,
        json={"file": meta},
        headers={
            "X-Goog-Upload-Protocol": "resumable",
            "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Length": str(len(data)),
            "X-Goog-Upload-Header-Content-Type": mime,
        },
    )
    url, offset = start.headers["x-goog-upload-url"], 0
    while True:
        chunk = data[offset : offset + CHUNK]
        last = offset + len(chunk) >= len(data)
        answer = request(
            client,
            "POST",
            url,
            what=f"upload {what}",
            max_retries=retries,
            content=chunk,
            headers={
                "X-Goog-Upload-Command": "upload, finalize" if last else "upload",
                "X-Goog-Upload-Offset": str(offset),
            },
            made=_wrapped(made) if last and made is not None else None,
        )
        offset += len(chunk)
        if last:
            return dict(answer.json()["file"])


def _wrapped(made: Callable[[], dict[str, Any] | None]) -> Callable[[], dict[str, Any] | None]:
    """``made`` as the finalizing chunk's answer: ``{"file": File}``."""

    def found() -> dict[str, Any] | None:
        file = made()
        return None if file is None else {"file": file}

    return found


def get_file(client: httpx.Client, name: str, retries: int) -> dict[str, Any] | None:
    """The ``File`` named ``name`` (``files/...``), None where there is none (never made, or
    deleted: expired)."""
    try:
        got = request(client, "GET", f"/{API_VERSION}/{name}", what=f"look up {name}",
                      max_retries=retries)  # fmt: skip
    except ProviderError as exc:
        if exc.status in {403, 404}:  # Google answers 403 for a file that is gone
            return None
        raise
    return dict(got.json())


def delete_file(client: httpx.Client, name: str, retries: int) -> None:
    """Delete the ``File`` named ``name``; one already gone is no error."""
    try:
        request(client, "DELETE", f"/{API_VERSION}/{name}", what=f"delete {name}",
                max_retries=retries)  # fmt: skip
    except ProviderError as exc:
        if exc.status not in {403, 404}:
            raise


def list_batches(client: httpx.Client, retries: int) -> Iterator[dict[str, Any]]:
    """Every batch (newest first), each with ``id`` = its ``name`` for ``poll_batches``."""
    token: str | None = None
    while True:
        params: dict[str, Any] = {"pageSize": LIST_PAGE}
        if token:
            params["pageToken"] = token
        page = request(
            client,
            "GET",
            f"/{API_VERSION}/batches",
            what="list batches",
            params=params,
            max_retries=retries,
        ).json()
        for batch in page.get("operations") or []:
            yield {**batch, "id": batch["name"]}
        token = page.get("nextPageToken")
        if not token:
            return


def get_batch(client: httpx.Client, name: str, retries: int) -> dict[str, Any]:
    got = request(
        client,
        "GET",
        f"/{API_VERSION}/{name}",
        what=f"poll {name}",
        max_retries=retries,
    )
    return dict(got.json())
