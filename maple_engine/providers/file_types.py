"""What a file is, read from its first bytes (never its name), and how much of it there is:
a PDF's pages, an image's pixels, an audio recording's seconds. No I/O: bytes in, facts out.

A URL, which Maple does not fetch, is typed by the extension its path ends with instead
(`url_type`)."""

import dataclasses
import posixpath
import re
import struct
import urllib.parse
from typing import Literal

FileKind = Literal["pdf", "image", "audio"]

#: The kinds of file a ``--file-column`` may hold, by the name a message gives them.
KIND_NAMES: dict[FileKind, str] = {"pdf": "PDFs", "image": "images", "audio": "audio"}


@dataclasses.dataclass(frozen=True)
class FileType:
    """A file's kind, MIME type and format name (``wav``, ``mp3``, ``png``, ``pdf``)."""

    kind: FileKind
    mime: str
    format: str


PDF = FileType("pdf", "application/pdf", "pdf")
PNG = FileType("image", "image/png", "png")
JPEG = FileType("image", "image/jpeg", "jpeg")
GIF = FileType("image", "image/gif", "gif")
WEBP = FileType("image", "image/webp", "webp")
WAV = FileType("audio", "audio/wav", "wav")
MP3 = FileType("audio", "audio/mpeg", "mp3")

#: Each type by the extension a URL's path ends with (case aside).
URL_EXTENSIONS: dict[str, FileType] = {
    ".pdf": PDF,
    ".png": PNG,
    ".jpg": JPEG,
    ".jpeg": JPEG,
    ".webp": WEBP,
    ".gif": GIF,
    ".wav": WAV,
    ".mp3": MP3,
}

#: Bytes enough to tell every type apart.
HEAD_BYTES = 16


#: Each type by the bytes it starts with, at an offset (RIFF files name theirs at byte 8).
_MAGIC: tuple[tuple[int, bytes, FileType], ...] = (
    (0, b"%PDF-", PDF),
    (0, b"\x89PNG\r\n\x1a\n", PNG),
    (0, b"\xff\xd8\xff", JPEG),
    (0, b"GIF87a", GIF),
    (0, b"GIF89a", GIF),
    (8, b"WEBP", WEBP),
    (8, b"WAVE", WAV),
    (0, b"ID3", MP3),
)


def sniff(data: bytes) -> FileType | None:
    """The type the bytes begin with (magic numbers), or None for none of those Maple sends."""
    head = data[:HEAD_BYTES]
    for at, magic, kind in _MAGIC:
        if head[at : at + len(magic)] == magic and (at == 0 or head[:4] == b"RIFF"):
            return kind
    if len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:  # an MP3 frame's sync
        return MP3
    return None


def url_type(url: str) -> FileType | None:
    """The type a URL's path names by its extension (``.pdf``, ``.png``, ``.jpg``/``.jpeg``,
    ``.webp``, ``.gif``, ``.wav``, ``.mp3``; the query string aside), None for any other."""
    path = urllib.parse.urlsplit(url).path
    return URL_EXTENSIONS.get(posixpath.splitext(path)[1].lower())


_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def pdf_pages(data: bytes) -> int:
    """Pages of a PDF: its page objects (at least one)."""
    return max(1, len(_PAGE.findall(data)))


def image_size(data: bytes, kind: FileType) -> tuple[int, int] | None:
    """(width, height) in pixels from the image's header, None when it cannot be read."""
    try:
        if kind == PNG:
            return struct.unpack(">II", data[16:24])
        if kind == GIF:
            return struct.unpack("<HH", data[6:10])
        if kind == WEBP:
            return _webp_size(data)
        if kind == JPEG:
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        return width, int.from_bytes(data[27:30], "little") + 1
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """The frame header's size (the first SOFn marker)."""
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def audio_seconds(data: bytes, kind: FileType) -> float:
    """Length of a recording: a WAV's data over its byte rate; an MP3's size over its first
    frame's bit rate (constant bit rate assumed)."""
    if kind == WAV:
        return _wav_seconds(data)
    return _mp3_seconds(data)


def _wav_seconds(data: bytes) -> float:
    at, rate, size = 12, 0, 0
    while at + 8 <= len(data):
        chunk, length = data[at : at + 4], int.from_bytes(data[at + 4 : at + 8], "little")
        if chunk == b"fmt ":
            rate = int.from_bytes(data[at + 16 : at + 20], "little")  # bytes per second
        elif chunk == b"data":
            size = min(length, len(data) - at - 8)
            break
        at += 8 + length + (length & 1)
    return size / rate if rate else 0.0


_MP3_KBPS = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)


def _mp3_seconds(data: bytes) -> float:
    at = 0
    if data.startswith(b"ID3") and len(data) >= 10:
        at = 10 + sum((b & 0x7F) << (7 * (3 - i)) for i, b in enumerate(data[6:10]))
    while at + 3 < len(data) and not (data[at] == 0xFF and data[at + 1] & 0xE0 == 0xE0):
        at += 1
    if at + 3 >= len(data):
        return 0.0
    index = data[at + 2] >> 4
    kbps = _MP3_KBPS[index] if index < len(_MP3_KBPS) else 0
    return (len(data) - at) * 8 / (kbps * 1000) if kbps else 0.0
