"""What a provider takes as files beside a prompt (``--file-column``): the kinds, the limits,
the part each file becomes in its request, and how its tokens are counted.

A provider that takes files carries a `FileInputs` record on its capabilities
(``ProviderCapabilities.files``); one without takes none, and a job that sends it files is
refused before anything is read. The token rule is the provider's documented one, applied to
what `maple_engine.providers.file_types` measures (a PDF's pages, an image's pixels, a
recording's seconds); the emulator bills by the same rules.
"""

import base64
import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from maple_engine.providers.file_types import FileKind, FileType, audio_seconds, image_size
from maple_engine.providers.file_types import pdf_pages as count_pages

MB = 1_000_000
#: An upload that expires is sent only while it has half its life or this long left, whichever
#: is less (a batch may take a day to run): `reusable`.
REUSE_MARGIN_S = 24 * 3600
#: How a URL file's tokens are estimated (`FileInputs.url_tokens`), as the dry run says.
URL_ESTIMATE = "an image as 1024 x 1024, a PDF as one page, audio as a minute"


@dataclasses.dataclass(frozen=True)
class UploadedFile:
    """A file uploaded for use in requests: ``ref``, what a request names it by (OpenAI's file
    id, Gemini's file URI), when the provider deletes it (epoch seconds; None: never) and when
    it was made."""

    ref: str
    expires: float | None = None
    created: float | None = None

    def reusable(self, now: float) -> bool:
        """Whether the upload may still be sent: it never expires, or it has half its life
        or `REUSE_MARGIN_S` left, whichever is less."""
        if self.expires is None:
            return True
        life = self.expires - (self.created if self.created is not None else now)
        return self.expires - now > min(REUSE_MARGIN_S, life / 2)


@dataclasses.dataclass(frozen=True)
class AttachedFile:
    """One file of a row, read and typed: its name (the cell's last path part), type, bytes."""

    name: str
    type: FileType
    data: bytes

    @functools.cached_property
    def digest(self) -> str:
        """The SHA-256 of its bytes (hex): what names its upload and stands for it in keys."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @property
    def data_url(self) -> str:
        return f"data:{self.type.mime};base64,{self.base64}"

    @property
    def encoded_bytes(self) -> int:
        """Its size once base64-encoded into a request."""
        return 4 * math.ceil(len(self.data) / 3)


def tiles(width: int, height: int, side: int) -> int:
    """Tiles of ``side`` pixels covering the image."""
    return math.ceil(width / side) * math.ceil(height / side)


@dataclasses.dataclass(frozen=True)
class FileInputs:
    """The files a provider takes: ``kinds``, at most ``max_file_bytes`` each and
    ``max_request_bytes`` of files (base64-encoded) in one request; ``part`` makes the
    provider's content part of one file, ``url_part`` that of a URL the provider fetches itself,
    given the type its extension names (None: no known extension, sent as an image), for the
    ``url_kinds`` it fetches (``url_part`` None: it fetches none). Tokens: ``pdf_page_tokens``
    per page, ``audio_tokens_per_s`` per second, ``image_tokens(width, height)`` per image
    (``url_tokens`` for a URL, unread); ``kind_limits``: a kind's own smaller per-file limit,
    and ``kind_counts`` the most files of a kind in one request, where the provider documents
    them. Where the provider uploads (``id_part`` set: the part naming an uploaded file), files
    of ``upload_kinds`` go by id: each over ``upload_over`` bytes (encoded), then the largest
    of a request's others until its inline files fit ``inline_budget``; ``uploads_count``: the
    files sent by id count toward ``max_request_bytes`` by their bytes (else only the inline
    files, base64-encoded, do)."""

    kinds: frozenset[FileKind]
    max_file_bytes: int
    max_request_bytes: int
    part: Callable[[AttachedFile], dict[str, Any]]
    url_part: Callable[[str, FileType | None], dict[str, Any]] | None
    pdf_page_tokens: int
    audio_tokens_per_s: float
    image_tokens: Callable[[int, int], int]
    docs: str  # the vendor's page on file inputs
    kind_limits: tuple[tuple[FileKind, int], ...] = ()
    kind_counts: tuple[tuple[FileKind, int], ...] = ()
    url_kinds: frozenset[FileKind] = frozenset({"image"})
    upload_kinds: frozenset[FileKind] = frozenset()
    upload_over: int | None = None
    inline_budget: int | None = None
    uploads_count: bool = True
    id_part: Callable[[str, AttachedFile], dict[str, Any]] | None = None

    def sent_by_id(self, files: Sequence[AttachedFile]) -> set[int]:
        """The indexes of a request's ``files`` uploaded and sent by id where the provider
        uploads: those of ``upload_kinds`` over ``upload_over``, then the largest others of
        those kinds until the inline rest is within ``inline_budget``."""
        if self.id_part is None:
            return set()
        takes = [i for i, f in enumerate(files) if f.type.kind in self.upload_kinds]
        over = self.upload_over
        chosen = {i for i in takes if over is not None and files[i].encoded_bytes > over}
        inline = sum(f.encoded_bytes for i, f in enumerate(files) if i not in chosen)
        for i in sorted(set(takes) - chosen, key=lambda i: -files[i].encoded_bytes):
            if self.inline_budget is None or inline <= self.inline_budget:
                break
            chosen.add(i)
            inline -= files[i].encoded_bytes
        return chosen

    def request_bytes(self, file: AttachedFile, by_id: bool) -> int:
        """What ``file`` adds toward ``max_request_bytes``: its encoded size inline; sent by
        id, its bytes where uploads count (else nothing)."""
        if not by_id:
            return file.encoded_bytes
        return len(file.data) if self.uploads_count else 0

    def max_bytes(self, kind: FileKind) -> int:
        """The most bytes (base64-encoded) one file of ``kind`` may be."""
        return dict(self.kind_limits).get(kind, self.max_file_bytes)

    def url_tokens(self, kind: FileKind) -> int:
        """A URL's tokens, estimated since it is not read up front (`URL_ESTIMATE`): an image
        as 1024 x 1024, a PDF as one page, a recording as a minute."""
        if kind == "pdf":
            return self.pdf_page_tokens
        if kind == "audio":
            return math.ceil(self.audio_tokens_per_s * 60)
        return self.image_tokens(1024, 1024)

    def tokens(self, file: AttachedFile) -> int:
        """The prompt tokens the provider bills for ``file``."""
        if file.type.kind == "pdf":
            return self.pdf_page_tokens * count_pages(file.data)
        if file.type.kind == "audio":
            return math.ceil(self.audio_tokens_per_s * audio_seconds(file.data, file.type))
        size = image_size(file.data, file.type) or (1024, 1024)
        return self.image_tokens(*size)
