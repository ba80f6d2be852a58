"""Files typed by their bytes (URLs by their extension), measured, and made into each provider's own
part (no I/O)."""

import base64

import pytest

from maple_engine.providers.anthropic.file_parts import FILES as ANTHROPIC
from maple_engine.providers.file_inputs import AttachedFile, FileInputs
from maple_engine.providers.file_types import (
    GIF,
    JPEG,
    MP3,
    PDF,
    PNG,
    WAV,
    WEBP,
    audio_seconds,
    image_size,
    pdf_pages,
    sniff,
    url_type,
)
from maple_engine.providers.gemini.file_parts import FILES as GEMINI
from maple_engine.providers.openai.file_parts import FILES as OPENAI
from scripts.make_file_samples import image_bytes, pdf_bytes, wav_bytes

# An MPEG-1 layer III frame header at 128 kbps, after an empty ID3 tag: 16,000 bytes a second.
MP3_BYTES = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" + b"\x00" * 15_996


@pytest.mark.parametrize(
    ("data", "kind", "size"),
    [
        (image_bytes("PNG", (41, 17), 1), PNG, (41, 17)),
        (image_bytes("JPEG", (41, 17), 1), JPEG, (41, 17)),
        (image_bytes("WEBP", (41, 17), 1), WEBP, (41, 17)),
        (image_bytes("GIF", (41, 17), 1), GIF, (41, 17)),
    ],
)
def test_images_are_typed_and_sized_by_their_bytes(
    data: bytes, kind: object, size: tuple[int, int]
) -> None:
    assert sniff(data) == kind
    assert image_size(data, sniff(data)) == size  # type: ignore[arg-type]


def test_documents_and_recordings_are_typed_and_measured() -> None:
    pdf = pdf_bytes(["one", "two", "three"])
    assert sniff(pdf) == PDF and pdf_pages(pdf) == 3
    wav = wav_bytes(1.5, 440)
    assert sniff(wav) == WAV and audio_seconds(wav, WAV) == pytest.approx(1.5)
    assert sniff(MP3_BYTES) == MP3 and audio_seconds(MP3_BYTES, MP3) == pytest.approx(1.0)
    assert sniff(b"name,price\n") is None
    assert sniff(b"RIFF\x00\x00\x00\x00AVI LIST") is None  # a RIFF that is neither


def attached(data: bytes, name: str = "f") -> AttachedFile:
    kind = sniff(data)
    assert kind is not None
    return AttachedFile(name, kind, data)


def test_openai_parts_are_the_chat_apis_own() -> None:
    pdf, png, wav = pdf_bytes(["x"]), image_bytes("PNG", (4, 4), 0), wav_bytes(0.2, 300)
    b64 = base64.b64encode
    assert OPENAI.part(attached(pdf, "sheet.pdf")) == {
        "type": "file",
        "file": {
            "filename": "sheet.pdf",
            "file_data": "data:application/pdf;base64," + b64(pdf).decode(),
        },
    }
    assert OPENAI.part(attached(png)) == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + b64(png).decode()},
    }
    assert OPENAI.part(attached(wav)) == {
        "type": "input_audio",
        "input_audio": {"data": b64(wav).decode(), "format": "wav"},
    }


def test_anthropic_and_gemini_parts() -> None:
    pdf, mp3 = pdf_bytes(["x"]), MP3_BYTES
    data = base64.b64encode(pdf).decode()
    assert ANTHROPIC.part(attached(pdf)) == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
    }
    assert "audio" not in ANTHROPIC.kinds
    assert GEMINI.part(attached(pdf)) == {
        "inlineData": {"mimeType": "application/pdf", "data": data}
    }
    assert GEMINI.part(attached(mp3))["inlineData"]["mimeType"] == "audio/mp3"


def test_urls_are_typed_by_their_extension_and_sent_as_that_kinds_part() -> None:
    assert url_type("https://x.test/a/Sheet.PDF?sig=1#p2") == PDF
    assert url_type("https://x.test/photo.jpg") == url_type("https://x.test/b.jpeg") == JPEG
    assert url_type("https://x.test/call.mp3") == MP3
    assert url_type("https://x.test/image") is None  # no known extension: sent as an image
    assert url_type("https://x.test/a.pdf/view") is None  # the path's end, not any part
    pdf = "https://x.test/s.pdf"
    assert ANTHROPIC.url_part is not None and GEMINI.url_part is not None
    assert ANTHROPIC.url_part(pdf, PDF) == {
        "type": "document",
        "source": {"type": "url", "url": pdf},
    }
    assert ANTHROPIC.url_part(pdf, None)["type"] == "image"
    assert GEMINI.url_part(pdf, PDF) == {
        "fileData": {"fileUri": pdf, "mimeType": "application/pdf"}
    }
    assert GEMINI.url_part("https://x.test/c.mp3", MP3)["fileData"]["mimeType"] == "audio/mp3"
    assert OPENAI.url_kinds == {"image"}  # Chat Completions fetches no PDF or audio URL
    assert ANTHROPIC.url_kinds == {"pdf", "image"}


@pytest.mark.parametrize(
    ("files", "pdf", "small", "large", "url", "second"),
    [
        # 800 x 800 -> 768 x 768: 4 tiles of 512; a URL counts as 1024 x 1024, also 4 tiles
        (OPENAI, 765, 85 + 170, 85 + 170 * 4, 85 + 170 * 4, 10),
        (ANTHROPIC, 1_600, 2, 854, 1399, 0),  # width x height / 750, rounded up
        (GEMINI, 258, 258, 258 * 4, 258 * 4, 32),  # over 384: 258 per 768 x 768 tile
    ],
)
def test_tokens_follow_each_providers_rule(  # noqa: PLR0917  (one rule per row)
    files: FileInputs, pdf: int, small: int, large: int, url: int, second: int
) -> None:
    assert files.tokens(attached(pdf_bytes(["a", "b"]))) == 2 * pdf
    assert files.tokens(attached(image_bytes("PNG", (40, 30), 0))) == small
    assert files.tokens(attached(image_bytes("GIF", (800, 800), 0))) == large
    assert files.url_tokens("image") == url
    assert files.url_tokens("pdf") == pdf  # a PDF URL, unread, counts as one page
    if "audio" in files.kinds:
        assert files.tokens(attached(wav_bytes(2.0, 100))) == 2 * second
        assert files.url_tokens("audio") == 60 * second  # and a recording as a minute
