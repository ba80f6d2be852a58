"""The bytes of a block's files, read once for its plan and its encoding.

Planning a block reads each local or S3 file of its rows to digest it (the rows' digests hold
their files' bytes: `maple_engine.inputs.files.content_identities`), and encoding the rows it
sends reads them again to put them in the requests. A `FileReads` keeps what the first read got
for the second, and for every row of the block that names the same file, up to `HELD_BYTES`
(the files past it are read again when encoded), and forgets it all when the block is done
(`clear`), so memory stays bounded whatever the files add up to.
"""

from maple_engine.providers.file_inputs import MB
from maple_engine.storage.storage import filesystem_for

#: The most bytes of files a block keeps between its plan and its encoding.
HELD_BYTES = 128 * MB


def read_file(cell: str) -> bytes:
    """The bytes of a local path (read as a stream: a named pipe too) or ``s3://`` key."""
    if "://" not in cell:
        with open(cell, "rb") as local:
            return local.read()
    fs, path = filesystem_for(cell)
    with fs.open(path, "rb") as handle:
        data: bytes = handle.read()
    return data


class FileReads:
    """The files read for one block: each cell's bytes read once while they fit ``held``."""

    def __init__(self, held: int = HELD_BYTES) -> None:
        self.held = held
        self._files: dict[str, bytes] = {}
        self._bytes = 0

    def read(self, cell: str) -> bytes:
        """The bytes of ``cell`` (a local path or ``s3://`` key): kept, or read now (and kept
        while the block's files fit)."""
        data = self._files.get(cell)
        if data is None:
            data = read_file(cell)
            if self._bytes + len(data) <= self.held:
                self._files[cell] = data
                self._bytes += len(data)
        return data

    def clear(self) -> None:
        """Forget the block's files."""
        self._files.clear()
        self._bytes = 0
