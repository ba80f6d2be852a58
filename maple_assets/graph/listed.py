"""A job's state as one listing sees it: what a sensor tick reads, in a few storage calls.

A tick asks every shard what it needs next (``JobState.progress``): a summary, a submission,
a stop record, an estimate. Read file by file that was several storage calls per shard per
tick (about 600 sequential S3 requests at 200 shards). ``ListedStorage`` answers those reads
from ONE recursive listing of ``<job>/state/`` (one paginated LIST on S3): whether a key exists
comes from the listing, and a JSON object's bytes come from a process-wide cache keyed by the
object's version token (its ETag), so only objects written since the last tick are fetched. A
long-lived code server (the daemon's sensor host) keeps the cache between ticks; a fresh
process reads each object once.

Writes and deletes made through the view go to the real storage, and the keys they touch are
answered by the real storage from then on, so a tick always reads its own writes.
"""

import collections
import contextlib
import threading
from collections.abc import Iterator
from typing import IO, Any

import orjson

from maple_engine.errors import StorageError
from maple_engine.storage.storage import Storage

# JSON objects under job state are small (summaries, submissions, manifests): keep up to this
# many bytes of them, least recently used first out.
_CACHE_BYTES = 64 * 1024 * 1024


class _TokenCache:
    """Object bytes by (root, key, version token): a rewritten object has a new token."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0
        self._items: collections.OrderedDict[tuple[str, str, str], bytes] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, ident: tuple[str, str, str]) -> bytes | None:
        with self._lock:
            data = self._items.get(ident)
            if data is not None:
                self._items.move_to_end(ident)
            return data

    def put(self, ident: tuple[str, str, str], data: bytes) -> None:
        with self._lock:
            if ident in self._items or len(data) > self._limit:
                return
            self._items[ident] = data
            self._size += len(data)
            while self._size > self._limit:
                _, old = self._items.popitem(last=False)
                self._size -= len(old)


_CACHE = _TokenCache(_CACHE_BYTES)


class ListedStorage(Storage):
    """``storage`` with reads under ``prefix`` answered from one listing taken at creation."""

    def __init__(self, storage: Storage, prefix: str) -> None:  # no super(): shares its fs
        self.root, self.fs, self._base, self.remote, self.s3 = (
            storage.root,
            storage.fs,
            storage._base,
            storage.remote,
            storage.s3,
        )
        self._prefix = prefix.rstrip("/") + "/"
        self._tree = storage.list_tree(prefix)
        self._touched: set[str] = set()
        self.reads = 0  # objects fetched (not served from the cache), for tests and benches

    def _listed(self, key: str) -> bool:
        return key.startswith(self._prefix) and key not in self._touched

    def exists(self, key: str) -> bool:
        return key in self._tree if self._listed(key) else super().exists(key)

    def read_bytes(self, key: str) -> bytes:
        if not self._listed(key):
            return super().read_bytes(key)
        token = self._tree.get(key)
        if token is None:
            raise StorageError(f"{self.uri(key)} does not exist")
        ident = (self.root, key, token)
        data = _CACHE.get(ident)
        if data is None:
            data = super().read_bytes(key)
            self.reads += 1
            _CACHE.put(ident, data)
        return data

    def read_json(self, key: str) -> Any:
        return orjson.loads(self.read_bytes(key))

    def list_keys(self, prefix: str) -> list[str]:
        folder = prefix.rstrip("/") + "/"
        if not folder.startswith(self._prefix) or any(k.startswith(folder) for k in self._touched):
            return super().list_keys(prefix)
        names = {k[len(folder) :].split("/", 1)[0] for k in self._tree if k.startswith(folder)}
        return [f"{folder}{name}" for name in sorted(names)]

    # -- writes go through, and the keys they touch are no longer answered from the listing --
    def delete(self, key: str) -> None:
        self._touched.add(key)
        self._touched.update(k for k in self._tree if k.startswith(key.rstrip("/") + "/"))
        super().delete(key)

    @contextlib.contextmanager
    def open_write(self, key: str) -> Iterator[IO[bytes]]:
        self._touched.add(key)
        with super().open_write(key) as handle:
            yield handle

    def create_exclusive(self, key: str, data: bytes) -> bool:
        self._touched.add(key)
        return super().create_exclusive(key, data)
