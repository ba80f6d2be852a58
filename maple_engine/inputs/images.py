"""Image URL checks before an ``invalid_image`` retry: is the image still there?

A HEAD per URL (falling back to a streamed GET when HEAD is refused or fails), short timeouts and
bounded concurrency. Only a definite answer fails a row: a 4xx, or a URL that is not http(s) or
a data URL. Timeouts and 5xx count as "unknown" and the row is retried as usual.
"""

import asyncio
from collections.abc import Iterable

import httpx

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_CONCURRENCY = 16
_HEAD_FALLBACK = frozenset({400, 403, 405, 501})


def _client(timeout_s: float, concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 3.0))
    return httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=True)


async def _get_status(client: httpx.AsyncClient, url: str) -> int | None:
    try:
        async with client.stream("GET", url) as response:
            return response.status_code
    except httpx.HTTPError:
        return None


async def _problem(client: httpx.AsyncClient, gate: asyncio.Semaphore, url: str) -> str | None:
    """Why the image is gone, or None when it exists or the check was inconclusive."""
    if url.startswith("data:"):
        return None
    if not url.startswith(("http://", "https://")):
        return f"image URL {url[:200]!r} is not an http(s) or data URL"
    async with gate:
        try:
            status: int | None = (await client.head(url)).status_code
        except httpx.HTTPError:
            status = None
        if status is None or status in _HEAD_FALLBACK:
            status = await _get_status(client, url)
    if status is not None and 400 <= status < 500:
        return f"image URL {url[:200]} answered HTTP {status}"
    return None


async def _check_all(urls: list[str], timeout_s: float, concurrency: int) -> dict[str, str]:
    gate = asyncio.Semaphore(concurrency)
    async with _client(timeout_s, concurrency) as client:
        problems = await asyncio.gather(*(_problem(client, gate, url) for url in urls))
    return {url: p for url, p in zip(urls, problems, strict=True) if p is not None}


def missing_images(
    urls: Iterable[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> dict[str, str]:
    """``{url: problem}`` for each distinct URL whose image is definitely gone."""
    distinct = sorted(set(urls))
    if not distinct:
        return {}
    return asyncio.run(_check_all(distinct, timeout_s, concurrency))
