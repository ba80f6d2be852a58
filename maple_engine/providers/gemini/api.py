"""Gemini API control calls over httpx: Files API resumable upload, batch list and get."""

from collections.abc import Iterator
from typing import Any

import httpx
import orjson

from maple_engine.durations import duration_seconds
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
    """Files API resumable upload: start a session, then send the bytes in chunks."""
    start = request(
        client,
        "POST",
        f"/upload/{API_VERSION}/files",
        what=f"start upload for {what}",
        max_retries=retries,
        json={"file": {"displayName": label}},
        headers={
            "X-Goog-Upload-Protocol": "resumable",
            "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Length": str(len(data)),
            "X-Goog-Upload-Header-Content-Type": "application/jsonl",
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
        )
        offset += len(chunk)
        if last:
            return str(answer.json()["file"]["name"])


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
