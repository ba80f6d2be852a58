"""Keep the process's memory flat over long jobs (glibc malloc tuning).

A job downloads and parses shard after shard: tens of MB of response bytes at a time, from
worker threads. glibc raises its mmap threshold after the first such buffer is freed and then
serves the next ones from per-thread heap arenas, which fragment: measured here, a loop parsing
50k-line result files grew to 760 MiB and stayed there; with a fixed 1 MiB mmap threshold and
two arenas it stayed at 360 MiB. Elsewhere (musl, macOS) this does nothing.
"""

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import sys

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


def tune_allocator(mmap_threshold: int = 1 << 20, arenas: int = 2) -> bool:
    """Large buffers go straight to mmap (returned on free); at most ``arenas`` heap arenas."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = _libc()
        return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(
            libc.mallopt(M_ARENA_MAX, arenas)
        )
    return False


def give_back() -> None:
    """Return the memory a finished stage freed to the system: Arrow's pool keeps what its
    buffers freed, glibc the free pages inside its heaps. A job's stages hold different data
    in different allocators; without this, what one stage freed but kept was the floor under
    the next stage's peak (1M x 256 embeddings: collection, then the merge)."""
    import pyarrow as pa  # here: this module tunes the allocator before such imports

    pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            _libc().malloc_trim(0)


@functools.cache
def _libc() -> ctypes.CDLL:
    """glibc, loaded once (finding it runs ``ldconfig``: ~3 ms a call)."""
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def settle_startup_objects() -> None:
    """Move every object alive now (the imported modules, classes and functions of Dagster,
    polars, pyarrow, SQLAlchemy: a few hundred thousand) out of the cyclic collector's sight.
    Each full collection walked all of them again: 5-7% of a 1M-row job's CPU. For a
    command's process only: objects alive now that later become garbage cycles are never
    collected. The collector runs again from here if the command turned it off while it
    loaded (``maple_assets.cli``)."""
    gc.collect()
    gc.freeze()
    gc.enable()
