"""Files in requests: each provider's file parts read back to their bytes, held to the
provider's limits, billed by its token rule, and named in the reply by a digest of their bytes.

The parts read (one list serves every dialect, since no two share a part type):

- OpenAI chat: ``{"type":"file","file":{"filename","file_data":"data:<mime>;base64,..."}}``
  or ``{"type":"file","file":{"file_id"}}`` (a PDF uploaded with purpose ``user_data``),
  ``{"type":"image_url","image_url":{"url": data URL or http(s) URL}}``,
  ``{"type":"input_audio","input_audio":{"data": base64,"format":"wav"|"mp3"}}``;
- Anthropic: ``{"type":"document"|"image","source":{"type":"base64","media_type","data"}}``
  or ``"source":{"type":"url","url"}``;
- Gemini: ``{"inlineData":{"mimeType","data"}}`` (or ``inline_data``/``mime_type``) and
  ``{"fileData":{"fileUri","mimeType"?}}`` (a file uploaded here by the Files API is read
  from the store, a URL fetched as below).

Each part takes its own kind, as the APIs do: an OpenAI ``file`` part a PDF as base64
``file_data`` (Chat Completions fetches no file URL), an ``image_url`` or Claude ``image`` an
image, a Claude ``document`` a PDF; a fetched URL of another kind is refused (`FileProblem`
with ``linked``).

With ``EmulatorConfig.fetch_urls``, a URL is fetched here as the provider would (short timeout;
a file served without a usable type is typed by its bytes); one that cannot be fetched is a
failed request the provider's way (`FileProblem` with ``fetch``). Without it, URLs are left
alone and cost nothing. The reply names every file the request carried, in order:
`` [file <kind> <sha256 of its bytes, 12 hex digits>]``, so a test can tell which file reached
which row.

Tokens, per the provider's documented rule (`RULES`): a PDF's pages (its ``/Type /Page``
objects) times the page rate, a recording's seconds times the audio rate (a WAV read with the
``wave`` module, an MP3 by its first frame's bit rate), an image by its size (read with Pillow).
"""

import base64
import binascii
import dataclasses
import hashlib
import io
import math
import re
import wave
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from PIL import Image

MB = 1_000_000
FETCH_TIMEOUT_S = 5.0
#: The URI of a file of the Gemini Files API (``.../v1beta/files/<id>``), here or at Google.
FILES_API_URI = re.compile(r"/v1(?:beta)?/files/[a-z0-9-]+$")


@dataclasses.dataclass(frozen=True)
class Received:
    """One file a request carried: its kind (``pdf``, ``image``, ``audio``), its bytes, and
    the URL it came from (None: inline)."""

    kind: str
    data: bytes
    url: str | None = None
    uploaded: bool = False  # named by its upload (a file_id, a Files API URI), not inline

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:12]


class FileProblem(Exception):
    """A file part the provider refuses: ``fetch`` True when a URL could not be fetched,
    ``linked`` True when a fetched URL is of a kind its part does not take."""

    def __init__(
        self, message: str, *, fetch: bool = False, linked: bool = False, gone: bool = False
    ) -> None:
        super().__init__(message)
        self.fetch = fetch
        self.linked = linked
        self.gone = gone  # an uploaded file the request names is deleted or was never made


Found = tuple[str, bytes, str | None]  # a file part's MIME type, bytes and URL (None: inline)
#: The bytes of an uploaded file by its id (None: no such file); None: no uploads are held.
Uploaded = Callable[[str], bytes | None] | None


def _tiles(width: int, height: int, side: int) -> int:
    return math.ceil(width / side) * math.ceil(height / side)


def _openai_image(width: int, height: int) -> int:
    fit = min(1.0, 2048 / max(width, height, 1))
    wide, high = width * fit, height * fit
    short = min(1.0, 768 / max(min(wide, high), 1))
    return 85 + 170 * _tiles(math.ceil(wide * short), math.ceil(high * short), 512)


def _anthropic_image(width: int, height: int) -> int:
    fit = min(1.0, 1568 / max(width, height, 1))
    return max(1, math.ceil(width * fit * height * fit / 750))


def _gemini_image(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return 258 * _tiles(width, height, 768)


@dataclasses.dataclass(frozen=True)
class FileRule:
    """One provider's file billing and limits (bytes are base64-encoded sizes): per file and
    per request, and where it documents them, per file of a kind (``kind_bytes``) and files of
    a kind per request (``kind_counts``); ``urls`` False: it fetches no URL."""

    page_tokens: int
    audio_tokens_per_s: float
    image_tokens: Callable[[int, int], int]
    max_file_bytes: int
    max_request_bytes: int
    kind_bytes: tuple[tuple[str, int], ...] = ()
    kind_counts: tuple[tuple[str, int], ...] = ()
    urls: bool = True
    #: an uploaded file's own limit (its bytes; None: ``max_file_bytes``), and whether
    #: uploaded files count toward ``max_request_bytes`` (by their bytes)
    upload_file_bytes: int | None = None
    uploads_count: bool = True


RULES = {
    "openai": FileRule(765, 10, _openai_image, 50 * MB, 50 * MB),
    "anthropic": FileRule(1_600, 0, _anthropic_image, 32 * MB, 32 * MB, (("image", 5 * MB),)),
    # inline files: the whole request under 20 MB; by the Files API, 2 GB a file
    # (https://ai.google.dev/gemini-api/docs/files), a PDF 50 MB
    # (https://ai.google.dev/gemini-api/docs/document-processing), counted toward no request
    "gemini": FileRule(
        258,
        32,
        _gemini_image,
        20 * MB,
        20 * MB,
        kind_bytes=(("pdf", 50 * MB),),
        upload_file_bytes=2_000 * MB,
        uploads_count=False,
    ),
    # Claude on Bedrock, held to Bedrock's own limits, not Anthropic's: at most 20 images of
    # 3.75 MB and 5 documents of 4.5 MB a message, and no URL source
    # (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html)
    "bedrock": FileRule(
        1_600,
        0,
        _anthropic_image,
        4_500_000,
        32 * MB,
        kind_bytes=(("image", 3_750_000), ("pdf", 4_500_000)),
        kind_counts=(("image", 20), ("pdf", 5)),
        urls=False,
    ),
}


def _data_url(url: str) -> tuple[str, bytes]:
    head, _, data = url.partition(",")
    return head.removeprefix("data:").split(";")[0], _b64(data)


def _b64(data: Any) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FileProblem(f"file data is not valid base64 ({exc})") from None


def _kind(mime: str) -> str:
    if mime == "application/pdf":
        return "pdf"
    return mime.split("/", maxsplit=1)[0] if mime.startswith(("image/", "audio/")) else "unknown"


def fetch(url: str) -> tuple[str, bytes]:
    """(MIME type, bytes) of ``url``; `FileProblem` (``fetch``) when it cannot be had."""
    try:
        response = httpx.get(url, timeout=FETCH_TIMEOUT_S, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise FileProblem(f"could not fetch {url}: {type(exc).__name__}", fetch=True) from None
    if response.status_code != 200:
        raise FileProblem(f"could not fetch {url}: HTTP {response.status_code}", fetch=True)
    mime = response.headers.get("content-type", "").split(";")[0].strip()
    return (mime if _kind(mime) != "unknown" else _typed(response.content)), response.content


def _typed(data: bytes) -> str:
    """The MIME type of fetched bytes served without a usable one, as a provider reads it."""
    if data.startswith(b"%PDF"):
        return "application/pdf"
    if data[8:12] == b"WAVE":
        return "audio/wav"
    try:
        with Image.open(io.BytesIO(data)) as image:
            return f"image/{(image.format or '').lower()}"
    except (OSError, ValueError):
        return "application/octet-stream"


def _linked(url: str) -> tuple[str, bytes, str | None]:
    if url.startswith("data:"):
        return (*_data_url(url), None)
    return (*fetch(url), url)


def _part_file(
    part: dict[str, Any], fetching: bool, uploaded: Uploaded
) -> tuple[str, bytes, str | None] | None:
    """(MIME type, bytes, URL or None) of one file part, None for a part that is no file (or
    a URL, unless ``fetching``)."""
    held = _uploaded_file(part, uploaded)
    if held is not None:
        return held
    if not fetching and _url_of(part) is not None:
        return None
    return _inline_or_fetched(part, uploaded)


def _uploaded_file(part: dict[str, Any], uploaded: Uploaded) -> Found | None:
    """A Gemini ``fileData`` part naming a file uploaded by the Files API (its ``uri``, or
    its ``files/<id>`` name): that file's bytes, typed by the part's ``mimeType`` or read."""
    linked = part.get("fileData") or part.get("file_data")
    if uploaded is None or not isinstance(linked, dict):
        return None
    uri = str(linked.get("fileUri") or linked.get("file_uri") or "")
    held = uploaded(uri)
    if held is None and FILES_API_URI.search(uri):  # Google: 403 for a file gone or unknown
        name = uri.rsplit("/", 1)[-1]
        raise FileProblem(
            f"You do not have permission to access the File {name} or it may not exist.",
            gone=True,
        )
    if held is None:
        return None
    mime = linked.get("mimeType") or linked.get("mime_type")
    return (str(mime) if mime else _typed(held)), held, None


def _url_of(part: dict[str, Any]) -> str | None:
    """The http(s) URL a part links to, else None."""
    image, source = part.get("image_url"), part.get("source")
    linked = part.get("fileData") or part.get("file_data")
    holders = ((image, "url"), (source, "url"), (linked, "fileUri"), (linked, "file_uri"))
    for holder, key in holders:
        url = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return url
    return None


def _of_kind(found: Found, kind: str, part: str) -> Found:
    """``found`` if its MIME type is of ``kind``; else the refusal of a part that takes only
    that kind (an ``image_url`` or Claude ``image`` that links a PDF, a ``document`` that
    links an image)."""
    if _kind(found[0]) != kind:
        message = f"a {part} part takes {kind} files, and this one is {found[0]}"
        raise FileProblem(message, linked=found[2] is not None)
    return found


def _openai_file(file: dict[str, Any], uploaded: Uploaded) -> Found:
    """A chat ``file`` part's PDF: base64 ``file_data`` or the ``file_id`` of an uploaded
    file (``uploaded`` reads it: None for an unknown id). Chat Completions takes no file URL
    (https://developers.openai.com/api/docs/guides/file-inputs: external file URL "Not
    supported" for Chat Completions), so a ``file_url``, or a URL as ``file_data``, is
    refused."""
    if "file_id" in file:
        file_id = str(file["file_id"])
        held = uploaded(file_id) if uploaded is not None else None
        if held is None:
            raise FileProblem(f"no uploaded file has the id {file_id!r}")
        return _of_kind((_typed(held), held, None), "pdf", "file")
    data = str(file.get("file_data", ""))
    if "file_url" in file or not data.startswith("data:"):
        raise FileProblem("a chat file part takes base64 file_data or a file_id, not a URL")
    return _of_kind((*_data_url(data), None), "pdf", "file")


def _inline_or_fetched(  # noqa: PLR0911
    part: dict[str, Any], uploaded: Uploaded
) -> tuple[str, bytes, str | None] | None:
    kind = part.get("type")
    if kind == "file":
        return _openai_file(part.get("file") or {}, uploaded)
    if kind == "image_url":
        image = part.get("image_url")
        url = str(image.get("url", "") if isinstance(image, dict) else image)
        return _of_kind(_linked(url), "image", "image_url")
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        return "audio/" + str(audio.get("format")), _b64(audio.get("data")), None
    if kind in ("document", "image"):
        source = part.get("source") or {}
        if source.get("type") == "url":  # a PDF for a document, an image for an image
            wanted = "pdf" if kind == "document" else "image"
            return _of_kind(_linked(str(source.get("url", ""))), wanted, kind)
        return str(source.get("media_type", "")), _b64(source.get("data")), None
    inline = part.get("inlineData") or part.get("inline_data")
    if isinstance(inline, dict):
        mime = inline.get("mimeType") or inline.get("mime_type") or ""
        return str(mime), _b64(inline.get("data")), None
    linked = part.get("fileData") or part.get("file_data")
    if isinstance(linked, dict):
        return _linked(str(linked.get("fileUri") or linked.get("file_uri") or ""))
    return None


def _parts(container: Any) -> Iterator[dict[str, Any]]:
    """Every content part of a message list or a Gemini ``contents`` list."""
    for message in container if isinstance(container, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content", message.get("parts"))
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict):
                yield part


def received_files(
    messages: Any, fetching: bool = False, uploaded: Uploaded = None
) -> list[Received]:
    """The files of a message list (or Gemini ``contents``), in order; `FileProblem` for a
    file part that cannot be read (``fetching`` False: URLs left out, not fetched)."""
    files: list[Received] = []
    for part in _parts(messages):
        found = _part_file(part, fetching, uploaded)
        if found is not None:
            mime, data, url = found
            files.append(Received(_kind(mime), data, url, _names_upload(part)))
    return files


def _names_upload(part: dict[str, Any]) -> bool:
    """Whether a file part names an uploaded file: a chat ``file`` part's ``file_id``, a
    ``fileData`` part's Files API URI."""
    file = part.get("file") if part.get("type") == "file" else None
    linked = part.get("fileData") or part.get("file_data")
    uri = (
        str(linked.get("fileUri") or linked.get("file_uri") or "")
        if isinstance(linked, dict)
        else ""
    )
    return (isinstance(file, dict) and "file_id" in file) or bool(FILES_API_URI.search(uri))


def carries_files(content: Any) -> bool:
    """Whether a message content list holds a part that is not text."""
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") not in (None, "text") for part in content
    )


def reply_note(files: list[Received]) -> str:
    """What the reply adds for the files: `` [file <kind> <digest>]`` each."""
    return "".join(f" [file {f.kind} {f.digest}]" for f in files)


_PAGE = re.compile(rb"/Type\s*/Page\b(?!s)")


def _seconds(file: Received) -> float:
    if file.data[8:12] == b"WAVE":
        with wave.open(io.BytesIO(file.data)) as recording:
            return float(recording.getnframes() / recording.getframerate())
    rates = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
    start = file.data.find(b"\xff\xfb")  # an MPEG-1 layer III frame
    kbps = rates[file.data[start + 2] >> 4] if 0 <= start < len(file.data) - 2 else 0
    return (len(file.data) - start) * 8 / (kbps * 1000) if kbps else 0.0


def file_tokens(file: Received, rule: FileRule) -> int:
    """The prompt tokens ``file`` costs under ``rule``."""
    if file.kind == "pdf":
        return rule.page_tokens * max(1, len(_PAGE.findall(file.data)))
    if file.kind == "audio":
        return math.ceil(rule.audio_tokens_per_s * _seconds(file))
    try:
        with Image.open(io.BytesIO(file.data)) as image:
            width, height = image.size
    except (OSError, ValueError):
        raise FileProblem("the image could not be decoded") from None
    return rule.image_tokens(width, height)


def _encoded(file: Received) -> int:
    return 4 * math.ceil(len(file.data) / 3)


def _sent_bytes(file: Received) -> int:
    """What a file adds to its request: its bytes by upload, else base64-encoded."""
    return len(file.data) if file.uploaded else _encoded(file)


def check_files(files: list[Received], rule: FileRule) -> None:
    """`FileProblem` for a file of an unknown kind, over the per-file limit (its kind's, if
    the rule has one; an uploaded one's own, by its bytes), more files of a kind than the rule
    takes, or files over the per-request limit (uploaded ones where they count)."""
    for file in files:
        if file.kind == "unknown":
            raise FileProblem("the file is not a PDF, an image or audio")
        own = rule.upload_file_bytes if file.uploaded else None
        limit = dict(rule.kind_bytes).get(file.kind, own or rule.max_file_bytes)
        if _sent_bytes(file) > limit:
            raise FileProblem(
                f"a file of {_sent_bytes(file):,} bytes is over the limit of {limit:,} bytes "
                f"per file ({file.kind})"
            )
    for kind, most in rule.kind_counts:
        count = sum(f.kind == kind for f in files)
        if count > most:
            raise FileProblem(f"{count} files of kind {kind} are over the limit of {most}")
    counted = [f for f in files if f.url is None and (rule.uploads_count or not f.uploaded)]
    total = sum(_sent_bytes(f) for f in counted)
    if total > rule.max_request_bytes:
        raise FileProblem(
            f"the request's files are {total:,} bytes, over the limit of "
            f"{rule.max_request_bytes:,} bytes per request"
        )


def files_billed(
    messages: Any, rule: FileRule, fetching: bool = False, uploaded: Uploaded = None
) -> tuple[list[Received], int]:
    """The request's files, checked, and the tokens they cost (`FileProblem` if refused;
    ``fetching`` False: its inline files only, no URL fetched)."""
    if not rule.urls and any(_url_of(part) is not None for part in _parts(messages)):
        raise FileProblem("a file part links a URL, and this API takes file bytes only")
    files = received_files(messages, fetching, uploaded)
    check_files(files, rule)
    return files, sum(file_tokens(f, rule) for f in files)
