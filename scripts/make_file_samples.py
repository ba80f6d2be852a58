"""Write the file samples under ``maple_assets/data/``: a few small PDFs, images in every
format ``--file-column`` takes, a WAV recording, and ``spec_sheets.csv`` pointing a row at each.

Run from the repository's root: ``python scripts/make_file_samples.py``. The outputs are
deterministic (the same bytes on every run) and a few kilobytes each; tests make their own
with the same functions (``pdf_bytes``, ``image_bytes``, ``wav_bytes``).
"""

import csv
import io
import math
import struct
import wave
from pathlib import Path

from PIL import Image

DATA = Path("maple_assets/data")
FOLDER = DATA / "files"


def pdf_bytes(pages: list[str]) -> bytes:
    """A PDF with one page of text per item of ``pages`` (Helvetica, 12 pt)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        objects.append(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
        )
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode())
    table = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write("".join(f"{o:010d} 00000 n \n" for o in offsets).encode())
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{table}\n%%EOF\n"
    out.write(trailer.encode())
    return out.getvalue()


def image_bytes(fmt: str, size: tuple[int, int], seed: int) -> bytes:
    """A ``fmt`` (PNG, JPEG, WEBP, GIF) image of ``size`` pixels: a gradient ``seed`` tints."""
    width, height = size
    image = Image.new("RGB", size)
    image.putdata(
        [
            ((x * 255) // width, (y * 255) // height, (seed * 53) % 256)
            for y in range(height)
            for x in range(width)
        ]
    )
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def wav_bytes(seconds: float, hertz: int, rate: int = 8000) -> bytes:
    """A mono 16-bit WAV of a ``hertz`` tone, ``seconds`` long."""
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * hertz * n / rate)))
        for n in range(int(seconds * rate))
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as recording:
        recording.setnchannels(1)
        recording.setsampwidth(2)
        recording.setframerate(rate)
        recording.writeframes(frames)
    return out.getvalue()


SAMPLES: list[tuple[str, str, str, bytes]] = [
    (
        "SKU-1001",
        "Oat milk 1 L",
        "oat-milk.pdf",
        pdf_bytes(["Oat milk 1 L. Allergens: oats. Store below 25 C."]),
    ),
    (
        "SKU-1002",
        "Dish soap 500 ml",
        "dish-soap-sds.pdf",
        pdf_bytes(["Safety data sheet: dish soap.", "Section 2: causes eye irritation."]),
    ),
    ("SKU-1003", "Rye bread 750 g", "rye-bread.png", image_bytes("PNG", (64, 48), 1)),
    ("SKU-1004", "Espresso beans 1 kg", "espresso.jpg", image_bytes("JPEG", (64, 48), 2)),
    ("SKU-1005", "Sparkling water 6 x 1.5 L", "water.webp", image_bytes("WEBP", (48, 64), 3)),
    ("SKU-1006", "Paper towels 8 rolls", "towels.gif", image_bytes("GIF", (32, 32), 4)),
    ("SKU-1007", "Call about a damaged parcel", "call.wav", wav_bytes(1.5, 440)),
]


def main() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    rows = []
    for sku, title, name, data in SAMPLES:
        path = FOLDER / name
        path.write_bytes(data)
        rows.append({"sku": sku, "title": title, "attachment": path.as_posix()})
    with (DATA / "spec_sheets.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["sku", "title", "attachment"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} files under {FOLDER} and {DATA / 'spec_sheets.csv'}")


if __name__ == "__main__":
    main()
