"""The files an OpenAI chat completion takes beside its prompt, as the API's own content parts.

- A PDF is a ``file`` part with its bytes as a base64 data URL in ``file_data`` and a
  ``filename``; Chat Completions takes PDFs only this way (or by uploaded ``file_id``), and no
  file URL (https://developers.openai.com/api/docs/guides/file-inputs). Each page costs its
  extracted text and an image of the page; Maple counts a page as that image at high detail.
- An image is an ``image_url`` part whose ``url`` is a base64 data URL (PNG, JPEG, WebP,
  non-animated GIF); a URL cell is sent as that part's URL, which OpenAI fetches
  (https://platform.openai.com/docs/guides/images-vision). Tokens at high detail: scaled to
  fit 2048 x 2048, then its short side to 768, 170 per 512-pixel tile plus 85.
- Audio is an ``input_audio`` part, ``{"data": base64, "format": "wav" | "mp3"}``, for the
  audio models (gpt-4o-audio-preview) (https://platform.openai.com/docs/guides/audio), billed
  about 10 tokens a second (one per 100 ms). The part holds the bytes only: no audio URL.
- So the only URLs Chat Completions fetches are images': the file-inputs page lists an
  external file URL (``file_url``) as "Not supported" for Chat Completions, and
  ``input_audio`` has no URL field. A PDF or audio URL is refused before anything is sent.
- Files may add up to 50 MB to one request, and one file may be that large
  (https://developers.openai.com/api/docs/guides/file-inputs); a batch file is still 200 MB.
  An uploaded file counts toward the 50 MB by its bytes, an inline one base64-encoded.
- A PDF over `UPLOAD_OVER` goes up once by the Files API (purpose ``user_data``) and is sent
  by its ``file_id`` (the same page: "Uploaded file ID (file_id)", PDF only for Chat
  Completions), on the batch API and in real time alike (`maple_engine.inputs.uploads`).
"""

import math
from typing import Any

from maple_engine.providers.file_inputs import MB, AttachedFile, FileInputs, tiles
from maple_engine.providers.file_types import FileType


def file_part(file: AttachedFile) -> dict[str, Any]:
    """The chat content part of one file."""
    if file.type.kind == "pdf":
        return {"type": "file", "file": {"filename": file.name, "file_data": file.data_url}}
    if file.type.kind == "audio":
        return {
            "type": "input_audio",
            "input_audio": {"data": file.base64, "format": file.type.format},
        }
    return {"type": "image_url", "image_url": {"url": file.data_url}}


#: PDFs over this many bytes (base64-encoded) are uploaded and sent by id, not inline: a 200 MB
#: batch file holds fewer than 20 requests carrying one, and every retry of the row would send
#: its bytes again; below it, inline saves an upload and a file left in the account.
UPLOAD_OVER = 10 * MB


def id_part(file_id: str, _file: AttachedFile) -> dict[str, Any]:
    """The chat content part of an uploaded PDF."""
    return {"type": "file", "file": {"file_id": file_id}}


def url_part(url: str, _type: FileType | None) -> dict[str, Any]:
    """A URL cell: an image OpenAI fetches (the only kind it fetches, ``url_kinds``)."""
    return {"type": "image_url", "image_url": {"url": url}}


def image_tokens(width: int, height: int) -> int:
    """High-detail image tokens: fit 2048 x 2048, short side to 768, 512-pixel tiles."""
    fit = min(1.0, 2048 / max(width, height, 1))
    short = min(1.0, 768 / max(min(width, height) * fit, 1))
    return 85 + 170 * tiles(math.ceil(width * fit * short), math.ceil(height * fit * short), 512)


FILES = FileInputs(
    kinds=frozenset({"pdf", "image", "audio"}),
    max_file_bytes=50 * MB,
    max_request_bytes=50 * MB,
    part=file_part,
    url_part=url_part,
    pdf_page_tokens=765,  # a page's image at high detail (1024 x 1024: 4 tiles)
    audio_tokens_per_s=10,
    image_tokens=image_tokens,
    docs="https://developers.openai.com/api/docs/guides/file-inputs",
    url_kinds=frozenset({"image"}),
    upload_kinds=frozenset({"pdf"}),
    upload_over=UPLOAD_OVER,
    id_part=id_part,
)
