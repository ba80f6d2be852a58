"""``--file-column`` through ``maple enrich``: PDFs, images and audio from local disk, moto's S3
and URLs on 127.0.0.1 reach the emulator as each provider's own parts, every row is answered
from its own file (the emulator names each file by a digest of the bytes it got), the dry run's
tokens match what the emulator bills, and each bad input is one line before anything is sent."""

import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import boto3
import httpx
import polars as pl
import pytest
from click.testing import CliRunner, Result

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets import enrichment
from maple_assets.cli.commands import main
from maple_engine.collect.responses import FILE_GONE
from maple_engine.errors import ConfigError
from maple_engine.inputs.files import with_files
from maple_engine.model import FILE_TOKENS, ROW_ID
from maple_engine.spec import JobSpec
from scripts.make_file_samples import image_bytes, pdf_bytes, wav_bytes
from tests.conftest import BUCKET
from tests.e2e.cli import maple
from tests.integration.test_bedrock_batch import BUCKET as BEDROCK_BUCKET
from tests.integration.test_bedrock_batch import MODEL as BEDROCK_MODEL
from tests.integration.test_bedrock_batch import bedrock_emulator, s3_url  # noqa: F401  (a fixture)

MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "gemini": "gemini-2.5-flash",
}


class _Files(http.server.BaseHTTPRequestHandler):
    """Serves ``FILES`` by path (the query aside); ``/flaky-*`` answers 500 the first time,
    then the file."""

    files: ClassVar[dict[str, bytes]] = {}
    seen: ClassVar[set[str]] = set()

    def _answer(self, body: bool) -> None:
        data = self.files.get(self.path.split("?")[0])
        flaky = self.path.startswith("/flaky-") and self.path not in self.seen
        self.seen.add(self.path)
        status = 404 if data is None else 500 if flaky else 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(data or b"") if status == 200 else 0))
        self.end_headers()
        if body and status == 200 and data is not None:
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def file_host() -> Iterator[tuple[str, dict[str, bytes]]]:
    files: dict[str, bytes] = {}
    handler = type("Handler", (_Files,), {"files": files, "seen": set()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", files
    server.shutdown()
    server.server_close()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def local(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / "files" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return str(path)


def mixed_rows(
    tmp_path: Path, *, audio: bool, s3: bool, host: tuple[str, dict[str, bytes]] | None
) -> pl.DataFrame:
    """A table of rows each with its own file: PDFs, four image formats, WAVs (``audio``),
    some on S3 (``s3``: moto's bucket) and some images as URLs on ``host``; ``expect`` holds
    the digest the row's reply must name."""
    rows: list[dict[str, str]] = []

    def add(name: str, kind: str, data: bytes, where: str) -> None:
        rows.append(
            {"title": f"item {len(rows)}", "file": where, "expect": f"[file {kind} {digest(data)}]"}
        )

    for i in range(2):
        data = pdf_bytes([f"Spec sheet {i}, page {p}" for p in range(i + 1)])
        add(f"p{i}.pdf", "pdf", data, local(tmp_path, f"p{i}.pdf", data))
    for i, fmt in enumerate(("PNG", "JPEG", "WEBP", "GIF")):
        data = image_bytes(fmt, (40 + i, 30), i)
        add(f"i{i}", "image", data, local(tmp_path, f"i{i}.{fmt.lower()}", data))
    if audio:
        data = wav_bytes(1.0 + 0.5, 330)
        add("a0.wav", "audio", data, local(tmp_path, "a0.wav", data))
    if s3:
        client = boto3.client("s3")
        for i, data in enumerate((pdf_bytes(["On S3"]), image_bytes("PNG", (20, 20), 9))):
            client.put_object(Bucket=BUCKET, Key=f"files/s{i}", Body=data)
            add(f"s{i}", "pdf" if i == 0 else "image", data, f"s3://{BUCKET}/files/s{i}")
    if host is not None:
        url, files = host
        for i in range(2):
            data = image_bytes("PNG", (24, 24), 20 + i)
            files[f"/u{i}.png"] = data
            add(f"u{i}", "image", data, f"{url}/u{i}.png")
    return pl.DataFrame(rows)


def enrich(
    table: pl.DataFrame,
    tmp_path: Path,
    provider: str,
    *extra: str,
    env: dict[str, str] | None = None,
) -> tuple[Result, Path]:
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    table.write_csv(source)
    family = next((f for f in MODELS if provider.startswith(f)), "openai")
    args = [
        "enrich", str(source), "--prompt", "Describe {title}", "--model", MODELS[family],
        "--provider", provider, "--file-column", "file", "--storage", str(tmp_path / "store"),
        "--output", str(out), "--poll-interval", "0.05", "--job", "files", *extra,
    ]  # fmt: skip
    return CliRunner().invoke(main, args, env=env), out


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(batch_seconds=0.05, fetch_urls=True)) as running:
        yield running


def provider_env(server: EmulatorServer) -> dict[str, str]:
    return {
        "MAPLE_EMULATOR_URL": server.url,
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": "k",
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "k",
        "GEMINI_BASE_URL": server.url,
        "GEMINI_API_KEY": "k",
    }


def dry_run_tokens(result: Result) -> int:
    found = re.search(r"input tokens\s+~([\d,]+)", result.output)
    assert found is not None, result.output
    return int(found.group(1).replace(",", ""))


@pytest.mark.parametrize(
    ("provider", "audio"),
    [
        ("emulator", True),  # OpenAI's batch API
        ("openai-realtime", True),
        ("anthropic", False),  # Claude takes no audio
        pytest.param("gemini", True, marks=pytest.mark.slow),
        pytest.param("anthropic-realtime", False, marks=pytest.mark.slow),
        pytest.param("gemini-realtime", True, marks=pytest.mark.slow),
    ],
)
def test_each_row_is_answered_from_its_own_file(  # noqa: PLR0917  (parameters and fixtures)
    provider: str,
    audio: bool,
    tmp_path: Path,
    s3: dict[str, str],
    file_host: tuple[str, dict[str, bytes]],
    server: EmulatorServer,
) -> None:
    table = mixed_rows(tmp_path, audio=audio, s3=True, host=file_host)
    result, out = enrich(table, tmp_path, provider, "--quiet", env=provider_env(server))
    assert result.exit_code == 0, result.output
    frame = pl.read_csv(out)
    assert frame["llm_status"].to_list() == ["succeeded"] * table.height
    for response, expect in zip(frame["llm_response"], table["expect"], strict=True):
        assert response.endswith(expect), (response, expect)  # its own file, and only it
    stats = server.stats()
    assert stats["file_parts"] == table.height
    assert stats["bodies_billed_twice"] == 0


@pytest.mark.parametrize(
    ("provider", "audio"),
    [
        ("emulator", True),
        pytest.param("anthropic", False, marks=pytest.mark.slow),
        pytest.param("gemini", True, marks=pytest.mark.slow),
    ],
)
def test_the_dry_run_counts_the_files_tokens_the_emulator_bills(
    provider: str, audio: bool, tmp_path: Path, s3: dict[str, str], server: EmulatorServer
) -> None:
    """Files read (local and S3) are estimated by the provider's own rule, as billed; a URL,
    not read up front, is estimated as a 1024 x 1024 image."""
    table = mixed_rows(tmp_path, audio=audio, s3=True, host=None)
    dry, _ = enrich(table, tmp_path, provider, "--dry-run", env=provider_env(server))
    assert dry.exit_code == 0, dry.output
    assert server.stats()["requests_received"] == 0
    assert "a URL unread: an image as 1024 x 1024, a PDF as one page" in dry.output
    result, out = enrich(table, tmp_path, provider, "--quiet", env=provider_env(server))
    assert result.exit_code == 0, result.output
    billed = int(pl.read_csv(out)["llm_input_tokens"].sum())
    assert abs(dry_run_tokens(dry) - billed) <= 0.1 * billed, (dry.output, billed)


def bad_run(
    tmp_path: Path,
    server: EmulatorServer,
    table: pl.DataFrame,
    provider: str = "emulator",
    *extra: str,
) -> str:
    result, _ = enrich(table, tmp_path, provider, "--quiet", *extra, env=provider_env(server))
    assert result.exit_code == 2, result.output
    stats = server.stats()
    assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0, stats
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_each_bad_file_is_one_line_before_anything_is_sent(
    tmp_path: Path, s3: dict[str, str], server: EmulatorServer
) -> None:
    pdf = local(tmp_path, "ok.pdf", pdf_bytes(["fine"]))
    text = local(tmp_path, "notes.txt", b"just some text, not a file Maple sends")
    wav = local(tmp_path, "call.wav", wav_bytes(0.5, 200))
    cases: list[tuple[str, list[str], tuple[str, ...]]] = [
        (
            "emulator",
            [pdf, str(tmp_path / "missing.pdf")],
            ("Row 1", "missing.pdf", "cannot be read"),
        ),
        ("emulator", [pdf, f"s3://{BUCKET}/no/such.pdf"], ("Row 1", "s3://", "cannot be read")),
        ("emulator", [text], ("Row 0", "notes.txt", "is not a PDF")),
        ("anthropic", [pdf, wav], ("Row 1", "call.wav", "does not take", "openai")),
        ("mistral", [pdf], ("--provider mistral", "use openai")),
    ]
    for provider, files, words in cases:
        table = pl.DataFrame({"title": [f"t{i}" for i in range(len(files))], "file": files})
        line = bad_run(tmp_path, server, table, provider)
        assert all(word in line for word in words), (line, words)


def test_files_over_the_limits_are_refused_before_anything_is_sent(
    tmp_path: Path, server: EmulatorServer
) -> None:
    big = local(tmp_path, "big.wav", wav_bytes(0.1, 200) + b"\0" * 9_000_000)  # 12 MB encoded
    over = bad_run(
        tmp_path,
        server,
        pl.DataFrame({"title": ["a"], "file": [big]}),
        "emulator",
        "--max-batch-bytes",
        "5000000",
    )
    assert "Row 0" in over and "big.wav" in over and "5,000,000 bytes" in over, over
    # Claude takes 32 MB of files a request and uploads none: three 12 MB PDFs are over
    sheet = local(tmp_path, "sheet.pdf", pdf_bytes(["big"]) + b"%" + b"0" * 9_000_000)
    table = pl.DataFrame({"title": ["a"], "file": [sheet], "more": [sheet], "most": [sheet]})
    extra = ("--file-column", "more", "--file-column", "most")
    both = bad_run(tmp_path, server, table, "anthropic", *extra)
    assert "Row 0" in both and "32,000,000 bytes per request" in both, both


def test_a_file_url_that_fails_is_invalid_file_and_checked_before_its_retry(
    tmp_path: Path, file_host: tuple[str, dict[str, bytes]], server: EmulatorServer
) -> None:
    url, files = file_host
    files["/flaky-1.png"] = image_bytes("PNG", (8, 8), 1)
    table = pl.DataFrame(
        {"title": ["gone", "flaky"], "file": [f"{url}/gone-0.png", f"{url}/flaky-1.png"]}
    )
    result, out = enrich(table, tmp_path, "emulator", "--quiet", env=provider_env(server))
    assert result.exit_code == 3, result.output
    frame = pl.read_csv(out)
    gone, flaky = frame.row(0, named=True), frame.row(1, named=True)
    assert (gone["llm_failure_class"], gone["llm_attempts"]) == ("invalid_file", 1)
    assert gone["llm_error"].startswith(FILE_GONE) and "HTTP 404" in gone["llm_error"]
    assert (flaky["llm_status"], flaky["llm_attempts"]) == ("succeeded", 2)
    assert flaky["llm_response"].endswith(f"[file image {digest(files['/flaky-1.png'])}]")


def many_rows(
    tmp_path: Path, count: int, *, audio: bool, host: tuple[str, dict[str, bytes]]
) -> pl.DataFrame:
    """``count`` rows, each with a file of its own: local PDFs, images and WAVs (``audio``),
    PDFs and images on moto's S3, and images as URLs on ``host``."""
    client = boto3.client("s3")
    url, served = host
    rows: list[dict[str, str]] = []
    for i in range(count):
        slot = i % (5 if audio else 4)
        if slot == 0:
            data, kind = pdf_bytes([f"Sheet {i}"] * (1 + i % 3)), "pdf"
        elif slot == 4:
            data, kind = wav_bytes(0.25 + (i % 4) / 4, 200 + i), "audio"
        else:
            data, kind = (
                image_bytes(("PNG", "JPEG", "WEBP")[slot - 1], (16 + i % 9, 12), i),
                "image",
            )
        if i % 7 == 3:
            client.put_object(Bucket=BUCKET, Key=f"many/{i}", Body=data)
            where = f"s3://{BUCKET}/many/{i}"
        elif i % 11 == 5 and kind == "image":
            served[f"/many-{i}"] = data
            where = f"{url}/many-{i}"
        else:
            where = local(tmp_path, f"many-{i}", data)
        rows.append(
            {"title": f"item {i}", "file": where, "expect": f"[file {kind} {digest(data)}]"}
        )
    return pl.DataFrame(rows)


def answered_from_own_files(out: Path, table: pl.DataFrame) -> None:
    frame = pl.read_csv(out) if out.suffix == ".csv" else pl.read_parquet(out)
    assert frame["llm_status"].to_list() == ["succeeded"] * table.height
    for response, expect in zip(frame["llm_response"], table["expect"], strict=True):
        assert response.endswith(expect), (response, expect)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_create", "after_results"])
def test_a_job_with_files_killed_and_rerun_pays_nothing_twice(
    point: str, tmp_path: Path, s3: dict[str, str], file_host: tuple[str, dict[str, bytes]]
) -> None:
    table = many_rows(tmp_path, 200, audio=True, host=file_host)
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    table.write_csv(source)
    args = (
        "enrich", str(source), "--prompt", "Describe {title}", "--model", "gpt-4o-mini",
        "--provider", "emulator", "--file-column", "file", "--storage", str(tmp_path / "store"),
        "--output", str(out), "--poll-interval", "0.05", "--job", "files",
        "--max-requests-per-batch", "80", "--quiet",
    )  # fmt: skip
    with EmulatorServer(EmulatorConfig(batch_seconds=0.2, fetch_urls=True)) as server:
        killed = maple(*args, url=server.url, MAPLE_CRASH_AT=point)
        assert killed.returncode == -9, killed.stderr
        again = maple(*args, url=server.url)
        assert again.returncode == 0, again.stderr
        stats = server.stats()
    assert stats["bodies_billed_twice"] == 0
    assert stats["requests_billed"] == table.height
    assert stats["file_parts"] == table.height
    answered_from_own_files(out, table)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("provider", "audio"),
    [
        ("emulator", True),
        ("openai-realtime", True),
        ("anthropic", False),
        ("anthropic-realtime", False),
        ("gemini", True),
        ("gemini-realtime", True),
    ],
)
def test_two_hundred_rows_of_files_on_every_provider_that_takes_them(  # noqa: PLR0917
    provider: str,
    audio: bool,
    tmp_path: Path,
    s3: dict[str, str],
    file_host: tuple[str, dict[str, bytes]],
    server: EmulatorServer,
) -> None:
    table = many_rows(tmp_path, 200, audio=audio, host=file_host)
    result, out = enrich(table, tmp_path, provider, "--quiet", env=provider_env(server))
    assert result.exit_code == 0, result.output
    answered_from_own_files(out, table)
    stats = server.stats()
    assert (stats["file_parts"], stats["bodies_billed_twice"]) == (table.height, 0)


@pytest.mark.slow  # a Bedrock job end to end on moto's S3 (at least 100 records a batch)
def test_bedrock_takes_pdfs_and_images_as_claudes_blocks(
    s3_url: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows: list[dict[str, str]] = []
    for i in range(100):
        data = pdf_bytes([f"Sheet {i}"]) if i % 2 else image_bytes("PNG", (10 + i % 5, 10), i)
        kind = "pdf" if i % 2 else "image"
        path = local(tmp_path, f"b{i}", data)
        rows.append({"title": f"t{i}", "file": path, "expect": f"[file {kind} {digest(data)}]"})
    table = pl.DataFrame(rows)
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    table.write_csv(source)
    with bedrock_emulator(s3_url, monkeypatch) as server:
        args = [
            "enrich", str(source), "--prompt", "Name {title}", "--model", BEDROCK_MODEL,
            "--provider", "bedrock", "--file-column", "file", "--storage", f"s3://{BEDROCK_BUCKET}/root",
            "--output", str(out), "--poll-interval", "0.1", "--quiet",
        ]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        stats = server.stats()
    answered_from_own_files(out, table)
    assert (stats["file_parts"], stats["bodies_billed_twice"]) == (100, 0)


@pytest.mark.slow  # ~12 s: a budget stop, then a canary and the job
def test_the_budget_and_the_canary_count_the_files(tmp_path: Path, server: EmulatorServer) -> None:
    """20-page PDFs: about 15,300 tokens a row at OpenAI's page rate; a budget that the text
    alone fits stops the job before anything is sent; the canary's rows are not paid again."""
    files = [
        local(tmp_path, f"long{i}.pdf", pdf_bytes([f"row {i} page {p}" for p in range(20)]))
        for i in range(4)
    ]
    table = pl.DataFrame({"title": [f"t{i}" for i in range(4)], "file": files})
    stopped, _ = enrich(table, tmp_path, "emulator", "--budget", "0.002", env=provider_env(server))
    assert stopped.exit_code == 4, stopped.output
    assert server.stats()["requests_received"] == 0
    result, out = enrich(table, tmp_path, "emulator", "--canary", "2", env=provider_env(server))
    assert result.exit_code == 0, result.output
    frame = pl.read_csv(out)
    assert frame["llm_status"].to_list() == ["succeeded"] * 4
    assert (frame["llm_input_tokens"] > 20 * 765).all()
    stats = server.stats()
    assert (stats["file_parts"], stats["requests_billed"], stats["bodies_billed_twice"]) == (
        4,
        4,
        0,
    )


@pytest.mark.slow  # ~11 s: three batches
def test_shards_are_cut_by_bytes_with_the_files_inside(
    tmp_path: Path, server: EmulatorServer
) -> None:
    """Six rows of a 1-second WAV each (about 21 KB encoded): batches of 50,000 bytes hold
    two of them, so the job is three batches."""
    files = [local(tmp_path, f"w{i}.wav", wav_bytes(1.0, 100 + i)) for i in range(6)]
    table = pl.DataFrame({"title": [f"t{i}" for i in range(6)], "file": files})
    dry, _ = enrich(
        table,
        tmp_path,
        "emulator",
        "--dry-run",
        "--max-batch-bytes",
        "50000",
        env=provider_env(server),
    )
    assert re.search(r"^shards\s+3$", dry.output, re.MULTILINE), dry.output
    result, _ = enrich(
        table,
        tmp_path,
        "emulator",
        "--quiet",
        "--max-batch-bytes",
        "50000",
        env=provider_env(server),
    )
    assert result.exit_code == 0, result.output
    assert server.stats()["batches_created"] == 3


@pytest.mark.slow  # ~8 s: three runs of one job
def test_a_rerun_sends_only_the_rows_whose_file_changed(
    tmp_path: Path, server: EmulatorServer
) -> None:
    """A request holds its file's bytes: the same path with new bytes is a new request (the
    row is sent again), unchanged files are answered from the response store."""
    files = [local(tmp_path, f"r{i}.pdf", pdf_bytes([f"version 1 of {i}"])) for i in range(3)]
    table = pl.DataFrame({"title": [f"t{i}" for i in range(3)], "file": files})
    first, _ = enrich(table, tmp_path, "emulator", "--quiet", env=provider_env(server))
    assert first.exit_code == 0, first.output
    again, _ = enrich(table, tmp_path, "emulator", "--quiet", env=provider_env(server))
    assert again.exit_code == 0, again.output
    assert server.stats()["requests_billed"] == 3
    changed = pdf_bytes(["version 2 of 1"])
    Path(files[1]).write_bytes(changed)
    last, out = enrich(table, tmp_path, "emulator", "--quiet", env=provider_env(server))
    assert last.exit_code == 0, last.output
    frame = pl.read_csv(out)
    assert frame["llm_reused"].to_list() == [True, False, True]
    assert frame["llm_response"][1].endswith(f"[file pdf {digest(changed)}]")
    assert server.stats()["requests_billed"] == 4


def test_a_provider_or_endpoint_without_files_is_refused_where_the_job_is_declared(
    tmp_path: Path,
) -> None:
    source = tmp_path / "in.csv"
    pl.DataFrame({"title": ["a"], "file": ["a.pdf"]}).write_csv(source)
    for provider, endpoint, words in (
        ("mistral", "chat", "use openai"),
        ("openai", "responses", "drop --endpoint responses"),
    ):
        with pytest.raises(ConfigError, match=words):
            enrichment(
                name="sheets", source=str(source), prompt="{title}", model="gpt-4o-mini",
                provider=provider, endpoint=endpoint, file_columns=["file"],
            )  # fmt: skip


def url_rows(host: tuple[str, dict[str, bytes]], *, audio: bool) -> pl.DataFrame:
    """Rows of URL cells on ``host``: a PDF, a JPEG at ``.JPG?size=large``, an image without
    an extension (sent as an image), and (``audio``) a WAV."""
    url, served = host
    rows: list[dict[str, str]] = []
    files = [
        ("/sheet.pdf", "pdf", pdf_bytes(["Spec sheet by URL", "page 2"])),
        ("/photo.JPG?size=large", "image", image_bytes("JPEG", (30, 20), 4)),
        ("/thumbnail", "image", image_bytes("PNG", (10, 10), 5)),
    ]
    if audio:
        files.append(("/call.wav", "audio", wav_bytes(0.5, 250)))
    for path, kind, data in files:
        served[path.split("?")[0]] = data
        rows.append({"title": path, "file": url + path, "expect": f"[file {kind} {digest(data)}]"})
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    ("provider", "audio"),
    [
        # a PDF URL as a document block with a url source (~5-12 s: a batch)
        pytest.param("anthropic", False, marks=pytest.mark.slow),
        pytest.param("gemini-realtime", True, marks=pytest.mark.slow),  # fileData, mimeType
    ],
)
def test_url_cells_are_typed_by_extension_and_sent_as_that_kinds_part(
    provider: str, audio: bool, tmp_path: Path, file_host: tuple[str, dict[str, bytes]]
) -> None:
    table = url_rows(file_host, audio=audio)
    with EmulatorServer(EmulatorConfig(batch_seconds=0.05, fetch_urls=True)) as server:
        result, out = enrich(table, tmp_path, provider, "--quiet", env=provider_env(server))
        assert result.exit_code == 0, result.output
        assert server.stats()["file_parts"] == table.height
    answered_from_own_files(out, table)


def test_a_url_of_a_kind_the_provider_fetches_no_url_of_is_refused_naming_a_lane(
    tmp_path: Path, file_host: tuple[str, dict[str, bytes]], server: EmulatorServer
) -> None:
    url, _ = file_host
    for provider, cell, words in (
        ("emulator", f"{url}/sheet.pdf", ("Row 1", "sheet.pdf", "PDFs", "anthropic")),
        ("openai-realtime", f"{url}/call.mp3", ("Row 1", "call.mp3", "audio", "use gemini")),
        ("anthropic", f"{url}/call.wav", ("Row 1", "call.wav", "audio", "use gemini")),
    ):
        table = pl.DataFrame({"title": ["a", "b"], "file": [f"{url}/ok.png", cell]})
        line = bad_run(tmp_path, server, table, provider)
        assert all(word in line for word in words), (line, words)


def test_the_emulator_refuses_a_link_to_a_kind_the_part_does_not_take(
    file_host: tuple[str, dict[str, bytes]], server: EmulatorServer
) -> None:
    """A URL without an extension that serves a PDF goes as an image part; the provider, as
    the emulator, refuses it: the row fails, it is not answered as a PDF."""
    url, served = file_host
    served["/no-extension"] = pdf_bytes(["not an image"])
    link = f"{url}/no-extension"
    openai_reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers={"Authorization": "Bearer k"},
        json={
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": link}}]}
            ],
        },
    )
    assert openai_reply.status_code == 400 and "application/pdf" in openai_reply.text
    assert openai_reply.json()["error"]["code"] == "invalid_image_format"
    as_file = {"type": "file", "file": {"filename": "s.pdf", "file_data": link}}
    refused = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers={"Authorization": "Bearer k"},
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": [as_file]}]},
    )
    assert refused.status_code == 400 and "not a URL" in refused.text
    claude = httpx.post(
        f"{server.url}/v1/messages",
        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        json={
            "model": "claude-3-5-haiku-latest",
            "max_tokens": 10,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "url": link}}],
                }
            ],
        },
    )
    assert claude.status_code == 400 and "application/pdf" in claude.text


def test_claude_on_bedrock_takes_at_most_five_documents_a_request(tmp_path: Path) -> None:
    """Bedrock's own limit, not Anthropic's: six PDF columns of one row are refused when the
    row is encoded, naming the row and the limit."""
    columns = [f"f{i}" for i in range(6)]
    spec = JobSpec(
        name="sheets", prompt="{title}", model=BEDROCK_MODEL, provider="bedrock",
        file_columns=columns,
    )  # fmt: skip
    pdf = local(tmp_path, "one.pdf", pdf_bytes(["one page"]))
    block = pl.DataFrame({ROW_ID: [0], "title": ["a"], **{c: [pdf] for c in columns}})
    with pytest.raises(ConfigError, match=r"Row 0 has 6 PDFs, over .*limit of 5 a request"):
        with_files(block, spec)
    five = spec.model_copy(update={"file_columns": columns[:5]})
    assert with_files(block.drop(columns[-1]), five)[FILE_TOKENS].to_list() == [5 * 1_600]
