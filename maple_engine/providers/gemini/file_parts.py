"""The files a Gemini request takes beside its prompt, as ``inlineData`` parts.

Each file is a part ``{"inlineData":{"mimeType":...,"data": base64}}`` (the REST API's JSON
names; ``inline_data``/``mime_type`` in its snake-case form); a URL cell is a
``{"fileData":{"fileUri": url, "mimeType": ...}}`` part that Gemini fetches, PDFs, images and
audio alike (the file-input-methods page below), its ``mimeType`` (a field the API's
``FileData`` type marks required) the one its extension names, none for a URL without a
known extension. The whole request must stay under 20 MB with its inline files
(https://ai.google.dev/gemini-api/docs/file-input-methods): where a row's files would not fit
`INLINE_BUDGET`, the largest go up by the Files API (`user_files`, 2 GB a file, kept 48 hours:
https://ai.google.dev/gemini-api/docs/files) and are sent as ``fileData`` parts naming their
URI. A PDF may be 50 MB (https://ai.google.dev/gemini-api/docs/document-processing).

Tokens (https://ai.google.dev/gemini-api/docs/tokens): an image both of whose sides are at most
384 pixels is 258 tokens, a larger one 258 per 768 x 768 tile; a PDF page is 258
(https://ai.google.dev/gemini-api/docs/document-processing); audio 32 a second
(https://ai.google.dev/gemini-api/docs/audio; WAV as ``audio/wav``, MP3 as ``audio/mp3``).
"""

from typing import Any

from maple_engine.providers.file_inputs import MB, AttachedFile, FileInputs, tiles
from maple_engine.providers.file_types import FileType

#: The MIME types Gemini documents where they differ from the file's own.
MIME_TYPES = {"audio/mpeg": "audio/mp3"}


def gemini_mime(type_: FileType) -> str:
    """The MIME type Gemini documents for a file of ``type_``."""
    return MIME_TYPES.get(type_.mime, type_.mime)


def file_part(file: AttachedFile) -> dict[str, Any]:
    """The ``inlineData`` part of one file."""
    return {"inlineData": {"mimeType": gemini_mime(file.type), "data": file.base64}}


def id_part(uri: str, file: AttachedFile) -> dict[str, Any]:
    """The ``fileData`` part of a file uploaded by the Files API, by its URI."""
    return {"fileData": {"fileUri": uri, "mimeType": gemini_mime(file.type)}}


def url_part(url: str, type_: FileType | None) -> dict[str, Any]:
    """A URL cell: a file Gemini fetches, of the MIME type its extension names."""
    if type_ is None:
        return {"fileData": {"fileUri": url}}
    return {"fileData": {"fileUri": url, "mimeType": gemini_mime(type_)}}


def image_tokens(width: int, height: int) -> int:
    """258 for a small image (both sides <= 384), else 258 per 768-pixel tile."""
    if width <= 384 and height <= 384:
        return 258
    return 258 * tiles(width, height, 768)


#: The inline files' share of a request under Gemini's 20 MB (base64-encoded): a megabyte is
#: left for the prompt, the system text and the schema.
INLINE_BUDGET = 19 * MB

FILES = FileInputs(
    kinds=frozenset({"pdf", "image", "audio"}),
    max_file_bytes=2_000 * MB,  # the Files API's per-file limit
    max_request_bytes=20 * MB,  # inline; uploaded files count toward none
    part=file_part,
    url_part=url_part,
    pdf_page_tokens=258,
    audio_tokens_per_s=32,
    image_tokens=image_tokens,
    docs="https://ai.google.dev/gemini-api/docs/file-input-methods",
    url_kinds=frozenset({"pdf", "image", "audio"}),
    kind_limits=(("pdf", 50 * MB),),
    upload_kinds=frozenset({"pdf", "image", "audio"}),
    inline_budget=INLINE_BUDGET,
    uploads_count=False,
    id_part=id_part,
)
