"""The files a Claude message takes beside its prompt, as the Messages API's own content blocks.

- A PDF is a ``document`` block with a base64 source,
  ``{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":...}}``
  (https://docs.anthropic.com/en/docs/build-with-claude/pdf-support). A request may be 32 MB
  and 100 pages; each page costs its text and an image of it, 1,500 to 3,000 tokens a page:
  Maple counts 1,600.
- A PDF URL is a ``document`` block with a ``url`` source, ``{"type":"url","url":...}``,
  which Anthropic fetches (the same page's "URL-based PDF document" example).
- An image (JPEG, PNG, GIF, WebP) is an ``image`` block with a base64 source, an image URL
  an ``image`` block with a ``url`` source that Anthropic fetches
  (https://docs.anthropic.com/en/docs/build-with-claude/vision), at most 5 MB each; tokens
  are width x height / 750 once the long side fits 1,568 pixels.
- Audio: the Messages API takes none; a job that sends it is refused before anything is read.
A URL without a known extension is sent as an image.
"""

import dataclasses
import math
from typing import Any

from maple_engine.providers.file_inputs import MB, AttachedFile, FileInputs
from maple_engine.providers.file_types import FileType


def file_part(file: AttachedFile) -> dict[str, Any]:
    """The content block of one file (a PDF's ``document``, an image's ``image``)."""
    block = "document" if file.type.kind == "pdf" else "image"
    source = {"type": "base64", "media_type": file.type.mime, "data": file.base64}
    return {"type": block, "source": source}


def url_part(url: str, type_: FileType | None) -> dict[str, Any]:
    """A URL cell: a PDF's ``document`` or an image's ``image`` block that Anthropic
    fetches."""
    block = "document" if type_ is not None and type_.kind == "pdf" else "image"
    return {"type": block, "source": {"type": "url", "url": url}}


def image_tokens(width: int, height: int) -> int:
    """Width x height / 750, the long side fitted to 1,568 pixels first."""
    fit = min(1.0, 1568 / max(width, height, 1))
    return max(1, math.ceil(width * fit * height * fit / 750))


FILES = FileInputs(
    kinds=frozenset({"pdf", "image"}),
    max_file_bytes=32 * MB,
    max_request_bytes=32 * MB,
    part=file_part,
    url_part=url_part,
    pdf_page_tokens=1_600,
    audio_tokens_per_s=0,
    image_tokens=image_tokens,
    docs="https://docs.anthropic.com/en/docs/build-with-claude/pdf-support",
    kind_limits=(("image", 5 * MB),),
    url_kinds=frozenset({"pdf", "image"}),
)

#: Claude on Bedrock (batch inference records carry its native body): the same blocks, base64
#: only (Bedrock fetches no URL), at most 20 images of 3.75 MB and 5 documents of 4.5 MB a
#: message (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html,
#: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_DocumentBlock.html).
BEDROCK_FILES = dataclasses.replace(
    FILES,
    max_file_bytes=4_500_000,
    url_part=None,
    url_kinds=frozenset(),
    kind_limits=(("image", 3_750_000),),
    kind_counts=(("image", 20), ("pdf", 5)),
    docs="https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_DocumentBlock.html",
)
