"""Files sent by their upload instead of their bytes: Gemini's past its inline limit (the Files
API, files kept 48 hours), OpenAI's large PDFs in a batch and in real time (``file_id``). Each
goes up once, a rerun after a kill uploads nothing twice, one past its expiry goes up again
without changing its rows' keys, and uploaded files count toward OpenAI's per-request total."""

import hashlib
import time
from pathlib import Path

import httpx
import orjson
import polars as pl
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.errors import ConfigError
from maple_engine.inputs.files import FILE_PARTS, with_files
from maple_engine.inputs.uploads import FileUploads
from maple_engine.model import KEY, REQUEST, ROW_ID
from maple_engine.plan.sharding import prepare_block
from maple_engine.providers.gemini.realtime import GeminiRealtimeProvider
from maple_engine.spec import JobSpec
from maple_engine.storage.storage import Storage
from scripts.make_file_samples import image_bytes, pdf_bytes
from tests.e2e.cli import maple
from tests.integration.test_file_columns import (
    answered_from_own_files,
    digest,
    enrich,
    local,
    provider_env,
)


def padded_pdf(text: str, size: int) -> bytes:
    """A one-page PDF of about ``size`` bytes (a comment pads it)."""
    return pdf_bytes([text]) + b"%" + b"0" * size


def rows(tmp_path: Path, *titles_files: tuple[str, bytes]) -> pl.DataFrame:
    """A table of (title, file) rows, each file written once by its digest; ``expect`` holds
    what the row's reply must name."""
    table = []
    for title, data in titles_files:
        path = local(tmp_path, f"{digest(data)}.pdf", data)
        table.append({"title": title, "file": path, "expect": f"[file pdf {digest(data)}]"})
    return pl.DataFrame(table)


def uploads(store: Path, provider: str) -> list[dict[str, object]]:
    return [orjson.loads(p.read_bytes()) for p in (store / "_uploads" / provider).glob("*.json")]


BIG = padded_pdf("a large spec sheet", 15_000_000)  # 20 MB encoded: past Gemini's inline limit
SMALL = pdf_bytes(["a small one"])


def test_gemini_uploads_a_file_past_its_inline_limit_once(tmp_path: Path) -> None:
    """A PDF that would take a Gemini request over 20 MB goes up once by the Files API, named
    by its digest, and its rows send it as ``fileData``; a small one stays inline. Each row is
    answered from its own file, and the upload is recorded with its expiry."""
    table = rows(tmp_path, ("a", BIG), ("b", SMALL), ("c", BIG))
    with EmulatorServer(EmulatorConfig(batch_seconds=0.05)) as server:
        result, out = enrich(table, tmp_path, "gemini", "--quiet", env=provider_env(server))
        assert result.exit_code == 0, result.output
        stats = server.stats()
    assert stats["files_uploaded"] == 1  # the PDF once; the shard went inline
    assert (stats["file_parts"], stats["requests_billed"]) == (3, 3)
    answered_from_own_files(out, table)
    [record] = uploads(tmp_path / "store", "gemini")
    name = f"files/maple-{hashlib.sha256(BIG).hexdigest()[:34]}"
    assert str(record["id"]).endswith(f"/v1beta/{name}"), record
    assert float(str(record["expires"])) > time.time() + 47 * 3600


@pytest.mark.slow  # ~15 s: waits for the emulator's uploaded file to expire
def test_a_gemini_upload_past_its_expiry_goes_up_again_and_keys_stay(tmp_path: Path) -> None:
    """The rerun after the upload expired (the emulator keeps files 8 s here) sends only the
    new row, whose file goes up again: the old rows' keys hold the file's digest, not its
    upload, so their stored answers are reused."""
    table = rows(tmp_path, ("a", BIG), ("b", SMALL))
    config = EmulatorConfig(batch_seconds=0.05, gemini_file_retention_s=8)
    with EmulatorServer(config) as server:
        env = provider_env(server)
        first, _ = enrich(table, tmp_path, "gemini", "--quiet", env=env)
        assert first.exit_code == 0, first.output
        [record] = uploads(tmp_path / "store", "gemini")
        time.sleep(max(0.0, float(str(record["expires"])) - time.time()) + 0.5)
        grown = pl.concat([table, rows(tmp_path, ("c", BIG))])
        again, out = enrich(grown, tmp_path, "gemini", "--quiet", env=env)
        assert again.exit_code == 0, again.output
        stats = server.stats()
    assert stats["files_uploaded"] == 2  # once, and again after it expired
    assert stats["requests_billed"] == 3  # the first two rows once each, then the new one
    answered_from_own_files(out, grown)
    [renewed] = uploads(tmp_path / "store", "gemini")
    assert float(str(renewed["expires"])) > float(str(record["expires"]))


def user_data_files(server: EmulatorServer) -> list[str]:
    """The names of the files uploaded to the emulator's OpenAI API for use in requests."""
    listed = httpx.get(
        f"{server.url}/v1/files",
        params={"purpose": "user_data"},
        headers={"Authorization": "Bearer k"},
    ).json()["data"]
    return [f["filename"] for f in listed]


@pytest.mark.slow  # ~20 s each: three maple processes (a dry run, a kill, a rerun) on big files
@pytest.mark.parametrize(
    ("provider", "big", "uploaded"),
    [
        ("emulator", padded_pdf("a large spec sheet", 8_000_000), 2),  # and the batch file
        ("openai-realtime", padded_pdf("a large spec sheet", 8_000_000), 1),
        ("gemini", BIG, 1),
        ("gemini-realtime", BIG, 1),
    ],
)
def test_a_large_file_goes_up_once_across_a_kill_before_its_record(
    provider: str, big: bytes, uploaded: int, tmp_path: Path
) -> None:
    """A file sent by its upload goes up once however many rows send it, and once across a
    kill between the upload and its record (the rerun finds it by its digest's name); a dry
    run uploads nothing, a small file stays inline, and each row is answered from its own."""
    table = rows(tmp_path, ("a", big), ("b", SMALL), ("c", big))
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    table.write_csv(source)
    model = "gemini-2.5-flash" if provider.startswith("gemini") else "gpt-4o-mini"
    args = (
        "enrich", str(source), "--prompt", "Describe {title}", "--model", model,
        "--provider", provider, "--file-column", "file", "--storage", str(tmp_path / "store"),
        "--output", str(out), "--poll-interval", "0.05", "--job", "big", "--quiet",
    )  # fmt: skip
    with EmulatorServer(EmulatorConfig(batch_seconds=0.05)) as server:
        env = {k: v for k, v in provider_env(server).items() if k != "MAPLE_EMULATOR_URL"}
        dry = maple(*args, "--dry-run", url=server.url, **env)
        assert dry.returncode == 0, dry.stderr
        assert server.stats()["files_uploaded"] == 0  # a dry run uploads nothing
        killed = maple(*args, url=server.url, MAPLE_CRASH_AT="file_uploaded", **env)
        assert killed.returncode == -9, killed.stderr
        again = maple(*args, url=server.url, **env)
        assert again.returncode == 0, again.stderr
        stats = server.stats()
        openai_files = user_data_files(server)
    assert stats["files_uploaded"] == uploaded
    assert (stats["file_parts"], stats["requests_billed"]) == (3, 3)
    answered_from_own_files(out, table)
    if not provider.startswith("gemini"):
        assert openai_files == [f"maple-{hashlib.sha256(big).hexdigest()[:32]}.pdf"]


def test_openai_real_time_sends_a_large_pdf_by_its_file_id(tmp_path: Path) -> None:
    """Chat Completions takes an uploaded PDF's ``file_id`` in real time as in a batch: a
    PDF over 10 MB encoded goes up once (purpose ``user_data``) and both its rows name it."""
    big = padded_pdf("a large spec sheet", 8_000_000)
    table = rows(tmp_path, ("a", big), ("b", SMALL), ("c", big))
    with EmulatorServer(EmulatorConfig()) as server:
        env = provider_env(server)
        result, out = enrich(table, tmp_path, "openai-realtime", "--quiet", env=env)
        assert result.exit_code == 0, result.output
        stats = server.stats()
        listed = user_data_files(server)
    assert listed == [f"maple-{hashlib.sha256(big).hexdigest()[:32]}.pdf"]
    assert stats["files_uploaded"] == 1
    assert (stats["file_parts"], stats["requests_billed"]) == (3, 3)
    answered_from_own_files(out, table)


def test_uploaded_files_count_toward_openais_per_request_total(tmp_path: Path) -> None:
    """OpenAI takes 50 MB of files a request, uploaded or inline: a 42 MB PDF (uploaded, and
    within the 50 MB a file by its bytes) with a 12 MB-encoded image is over, one line naming
    the row; the PDF alone goes by id."""
    pdf = local(tmp_path, "big.pdf", padded_pdf("big", 42_000_000))
    png = local(tmp_path, "big.png", image_bytes("PNG", (20, 20), 0) + b"\0" * 9_000_000)
    spec = JobSpec(
        name="big", prompt="{title}", model="gpt-4o-mini", provider="openai",
        file_columns=["file", "more"],
    )  # fmt: skip
    stand_ins = FileUploads(Storage(str(tmp_path / "store")), "openai", None)  # a dry run's
    block = pl.DataFrame({ROW_ID: [0], "title": ["a"], "file": [pdf], "more": [png]})
    with pytest.raises(ConfigError, match=r"Row 0's files .* over .*50,000,000 bytes per request"):
        with_files(block, spec, stand_ins)
    alone = with_files(block.with_columns(more=pl.lit(None, pl.String)), spec, stand_ins)
    assert '"file_id":"file-' in alone[FILE_PARTS][0]


def test_a_rows_key_holds_its_files_digest_not_its_uploads_reference(tmp_path: Path) -> None:
    """The same row sent with its file uploaded under another reference (re-uploaded after
    it expired) has the same request key: its stored answer is found. The uploads here are
    recorded and alive, so nothing is uploaded (the API's URL answers nothing)."""
    spec = JobSpec(
        name="big", prompt="{title}", model="gemini-2.5-flash", provider="gemini-realtime",
        file_columns=["file"],
    )  # fmt: skip
    wire = GeminiRealtimeProvider(api_key="k", base_url="http://127.0.0.1:9")
    block = rows(tmp_path, ("a", BIG)).select("title", "file")
    storage = Storage(str(tmp_path / "store"))
    record = f"_uploads/gemini-realtime/{hashlib.sha256(BIG).hexdigest()}.json"
    prepared = []
    for uri in (
        "https://files.example/v1beta/files/maple-one",
        "https://files.example/v1beta/files/maple-two",
    ):
        storage.write_json(record, {"id": uri, "bytes": len(BIG), "expires": None})
        uploads = FileUploads(storage, "gemini-realtime", wire)
        prepared.append(prepare_block(block, 0, spec, wire, uploads))
    first, second = (p.row(0, named=True) for p in prepared)
    assert '"fileUri":"https://files.example/v1beta/files/maple-one"' in first[REQUEST]
    assert '"fileUri":"https://files.example/v1beta/files/maple-two"' in second[REQUEST]
    assert first[KEY] == second[KEY]


def test_a_file_gone_before_its_real_time_send_fails_its_row_not_the_key(tmp_path: Path) -> None:
    """Google answers a request naming a deleted upload 403 PERMISSION_DENIED ("You do not
    have permission to access the File ..."): that row fails ``invalid_file``; the job is not
    stopped as if its key were wrong, and the other rows are answered. A rerun with
    ``--retry-failed`` uploads the file again and sends only that row."""
    table = rows(tmp_path, ("a", BIG), ("b", SMALL))
    config = EmulatorConfig(gemini_file_retention_s=0.001)  # gone as soon as it is made
    with EmulatorServer(config) as server:
        result, out = enrich(
            table, tmp_path, "gemini-realtime", "--quiet", env=provider_env(server)
        )
        stats = server.stats()
    assert "Check the API key" not in result.output, result.output
    assert stats["files_uploaded"] == 1
    by_title = {r["title"]: r for r in pl.read_csv(out).iter_rows(named=True)}
    assert by_title["b"]["llm_status"] == "succeeded"
    assert (by_title["a"]["llm_status"], by_title["a"]["llm_failure_class"]) == (
        "failed",
        "invalid_file",
    )
    assert "access the File" in str(by_title["a"]["llm_error"])
    with EmulatorServer(EmulatorConfig()) as server:  # files kept 48 hours
        env = provider_env(server)
        again, out = enrich(
            table, tmp_path, "gemini-realtime", "--quiet", "--retry-failed", env=env
        )
        stats = server.stats()
    assert again.exit_code == 0, again.output
    assert (stats["files_uploaded"], stats["requests_billed"]) == (1, 1)
    answered_from_own_files(out, table)
