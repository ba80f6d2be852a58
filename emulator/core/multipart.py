"""Minimal multipart/form-data parsing for uploads that may be hundreds of megabytes.

The request body is first streamed to a spool file on disk; ``parse_spooled`` then walks it
with ``mmap`` and copies the file part straight to its final path, never holding it in memory.
"""

import hashlib
import mmap
import re
from dataclasses import dataclass, field
from pathlib import Path

_BOUNDARY = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)
_DISPOSITION_NAME = re.compile(rb'\bname="([^"]*)"', re.IGNORECASE)
_DISPOSITION_FILENAME = re.compile(rb'\bfilename="([^"]*)"', re.IGNORECASE)
_COPY_CHUNK = 8 * 1024 * 1024


class MultipartError(ValueError):
    """The body is not valid multipart/form-data."""


@dataclass
class Upload:
    """The parsed form: text fields plus at most one file part written to ``file_path``."""

    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    file_field: str | None = None
    file_size: int = 0
    digest: int = 0


def boundary_of(content_type: str) -> bytes:
    """The boundary from a ``multipart/form-data`` content type."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise MultipartError("Content-Type must be multipart/form-data")
    match = _BOUNDARY.search(content_type)
    if match is None:
        raise MultipartError("multipart/form-data without a boundary")
    return match.group(1).encode()


def parse_spooled(spool: Path, boundary: bytes, file_path: Path) -> Upload:
    """Parse the body stored in ``spool``; the (first) file part is copied to ``file_path``."""
    upload = Upload()
    if spool.stat().st_size == 0:
        raise MultipartError("empty multipart body")
    delimiter = b"\r\n--" + boundary
    with spool.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = data.find(b"--" + boundary)
        if start < 0:
            raise MultipartError("multipart boundary not found in body")
        position = start + len(boundary) + 2
        while data[position : position + 2] != b"--":
            headers_end = data.find(b"\r\n\r\n", position)
            if headers_end < 0:
                raise MultipartError("multipart part without a header block")
            headers = data[position:headers_end]
            body_start = headers_end + 4
            body_end = data.find(delimiter, body_start)
            if body_end < 0:
                raise MultipartError("multipart part is not terminated by the boundary")
            _store_part(upload, headers, data, start=body_start, end=body_end, file_path=file_path)
            position = body_end + len(delimiter)
    return upload


def _store_part(
    upload: Upload, headers: bytes, data: mmap.mmap, *, start: int, end: int, file_path: Path
) -> None:
    name_match = _DISPOSITION_NAME.search(headers)
    name = name_match.group(1).decode() if name_match else ""
    filename_match = _DISPOSITION_FILENAME.search(headers)
    if filename_match is None or upload.filename is not None:
        upload.fields[name] = data[start:end].decode("utf-8", errors="replace")
        return
    upload.filename = filename_match.group(1).decode("utf-8", errors="replace")
    upload.file_field = name
    upload.file_size = end - start
    digest = hashlib.blake2b(digest_size=16)
    with file_path.open("wb") as out:
        for offset in range(start, end, _COPY_CHUNK):
            chunk = data[offset : min(end, offset + _COPY_CHUNK)]
            digest.update(chunk)
            out.write(chunk)
    upload.digest = int.from_bytes(digest.digest()[:8], "little")
