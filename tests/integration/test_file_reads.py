"""Each local file of a job is read once a run: for its row's digest and its request alike.

The files are named pipes, each fed its bytes once per run by a writer that then feeds any
further read bytes of no known type, which the job refuses: a run that read a file twice would
fail, or hang until the writer gives up."""

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.inputs.file_reads import FileReads
from scripts.make_file_samples import image_bytes, pdf_bytes
from tests.integration.test_file_columns import answered_from_own_files, digest, enrich

WRONG = b"read twice"


def _feed(path: Path, data: bytes, stop: threading.Event) -> None:
    """Write ``data`` to the first reader of the pipe at ``path``, `WRONG` to any later one
    (one that opens it after the first closed it)."""
    fed = first_gone = False
    while not stop.is_set():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader: none yet, or the first is done with it
            first_gone = fed
            time.sleep(0.005)
            continue
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as pipe:
            if not fed or first_gone:
                pipe.write(WRONG if fed else data)
            fed = True
        os.utime(path, (0, 0))  # as it was: a job's version stamps its files' times
        time.sleep(0.005)


@contextmanager
def fed_once(files: dict[Path, bytes]) -> Iterator[None]:
    """Each named pipe of ``files`` feeds its bytes to its first reader while this lasts."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=_feed, args=(p, d, stop), daemon=True) for p, d in files.items()
    ]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)


def test_each_file_is_read_once_a_run(tmp_path: Path) -> None:
    """The first run reads each file once to encode its row and digest it; a rerun with a new
    prompt, which renders every row again, reads each once more."""
    datas = [pdf_bytes(["one"]), image_bytes("PNG", (30, 20), 1), pdf_bytes(["two", "three"])]
    files = {}
    for i, data in enumerate(datas):
        path = tmp_path / f"pipe-{i}"
        os.mkfifo(path)
        os.utime(path, (0, 0))
        files[path] = data
    kinds = ["pdf", "image", "pdf"]
    table = pl.DataFrame(
        {
            "title": ["a", "b", "c"],
            "file": [str(p) for p in files],
            "expect": [f"[file {k} {digest(d)}]" for k, d in zip(kinds, datas, strict=True)],
        }
    )
    with EmulatorServer(EmulatorConfig(batch_seconds=0.05)) as server:
        env = {"MAPLE_EMULATOR_URL": server.url}
        for prompt in ("Describe {title}", "Summarise {title}"):
            with fed_once(files):
                result, out = enrich(
                    table, tmp_path, "emulator", "--quiet", "--prompt", prompt, env=env
                )
            assert result.exit_code == 0, result.output
            answered_from_own_files(out, table)


def test_a_blocks_files_are_kept_while_they_fit_and_forgotten_after(tmp_path: Path) -> None:
    """Read through `FileReads`, a file is read once while the block's files fit (a change on
    disk is not seen), read again when past the bytes held, and read afresh after ``clear``."""
    small, large = tmp_path / "small", tmp_path / "large"
    small.write_bytes(b"a" * 10)
    large.write_bytes(b"b" * 30)
    reads = FileReads(held=32)
    assert reads.read(str(small)) == b"a" * 10
    assert reads.read(str(large)) == b"b" * 30  # 40 bytes: not kept
    small.write_bytes(b"c" * 10)
    large.write_bytes(b"d" * 30)
    assert reads.read(str(small)) == b"a" * 10
    assert reads.read(str(large)) == b"d" * 30
    reads.clear()
    assert reads.read(str(small)) == b"c" * 10
