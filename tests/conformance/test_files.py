"""f. A job whose rows carry files (``--file-column``: a PDF or an image each, on local disk)
runs to its end on every name whose provider takes them, each row answered from its own file;
a name that takes none refuses the job in one line, exit 2, before anything is sent. A PDF of
20 MB encoded goes by its upload where the provider uploads files (once, however many rows
send it), inline where the provider takes it so, and is refused up front elsewhere."""

import hashlib
from pathlib import Path

import polars as pl
import pytest

from emulator.server import EmulatorServer
from maple_engine.providers.registry import capabilities
from scripts.make_file_samples import image_bytes, pdf_bytes
from tests.conformance.cases import CASES, Case
from tests.conformance.jobs import job_args, ok, output, run, storage, with_known_failure
from tests.e2e.hostile import one_line


def with_files(case: Case, work: Path) -> tuple[list[str], list[str]]:
    """The case's job with a file per row, and what each row's reply must end with."""
    args = job_args(case, work, "enrich", "--file-column", "file")
    expect, paths = [], []
    for i in range(case.rows):
        data = pdf_bytes([f"thing {i}"]) if i % 2 else image_bytes("PNG", (8 + i % 5, 8), i)
        path = work / f"file-{i}"
        path.write_bytes(data)
        paths.append(str(path))
        expect.append(
            f"[file {'pdf' if i % 2 else 'image'} {hashlib.sha256(data).hexdigest()[:12]}]"
        )
    table = work / "items.parquet"
    pl.read_parquet(table).with_columns(pl.Series("file", paths)).write_parquet(table)
    return args, expect


@pytest.mark.slow
@pytest.mark.parametrize("case", [with_known_failure(c, "files") for c in CASES])
def test_a_job_with_files_runs_where_the_provider_takes_them(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    args, expect = with_files(case, tmp_path)
    done = run(case, server.url, s3_url, *args)
    stats = server.stats()
    if capabilities(case.provider).files is None:
        assert done.returncode == 2, done.stderr[-3000:]
        assert "--file-column" in one_line(done.stderr), done.stderr
        assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0, stats
        return
    ok(done)
    replies = output(tmp_path)["llm_response"].to_list()
    assert all(r.endswith(e) for r, e in zip(replies, expect, strict=True)), replies
    assert (stats["file_parts"], stats["bodies_billed_twice"]) == (case.rows, 0), stats


@pytest.mark.slow
@pytest.mark.parametrize("case", [with_known_failure(c, "files") for c in CASES])
def test_a_pdf_url_is_sent_where_the_provider_fetches_one_and_refused_up_front_elsewhere(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    """A URL cell is typed by its extension, never fetched by Maple: a name whose provider
    fetches PDF URLs sends each as its own part; any other refuses the job in one line, exit 2,
    before a request is sent or a file uploaded."""
    args = job_args(case, tmp_path, "enrich", "--file-column", "file")
    table = tmp_path / "items.parquet"
    urls = [f"http://127.0.0.1:9/sheets/sheet-{i}.pdf" for i in range(case.rows)]
    pl.read_parquet(table).with_columns(pl.Series("file", urls)).write_parquet(table)
    done = run(case, server.url, s3_url, *args)
    stats = server.stats()
    files = capabilities(case.provider).files
    if files is None or "pdf" not in files.url_kinds or files.url_part is None:
        assert done.returncode == 2, done.stderr[-3000:]
        assert one_line(done.stderr).startswith("error: "), done.stderr
        assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0, stats
        return
    ok(done)
    assert stats["bodies_billed_twice"] == 0, stats


@pytest.mark.slow
@pytest.mark.parametrize("case", [with_known_failure(c, "files") for c in CASES])
def test_a_large_pdf_goes_up_once_where_the_provider_uploads_files(
    case: Case, server: EmulatorServer, s3_url: str, tmp_path: Path
) -> None:
    """Two rows send the same 20 MB-encoded PDF (past OpenAI's 10 MB for inline PDFs and
    Gemini's 20 MB requests), a third a small one: where the provider uploads files, the large
    one goes up once and is recorded under the storage root; a provider that takes it inline
    sends it so; any other refuses the job in one line, before anything is sent."""
    args = job_args(case, tmp_path, "enrich", "--file-column", "file", rows=3)
    big = pdf_bytes(["a large sheet"]) + b"%" + b"0" * 15_000_000
    files = [big, pdf_bytes(["a small sheet"]), big]
    paths = []
    for i, data in enumerate(files):
        (tmp_path / f"file-{i}.pdf").write_bytes(data)
        paths.append(str(tmp_path / f"file-{i}.pdf"))
    table = tmp_path / "items.parquet"
    pl.read_parquet(table).with_columns(pl.Series("file", paths)).write_parquet(table)
    done = run(case, server.url, s3_url, *args)
    stats = server.stats()
    if done.returncode == 2:  # no files, or none this large: refused before anything is sent
        assert one_line(done.stderr).startswith("error: "), done.stderr
        assert stats["requests_received"] == 0 and stats["files_uploaded"] == 0, stats
        assert capabilities(case.provider).files is None or "bytes" in done.stderr
        return
    ok(done)
    replies = output(tmp_path)["llm_response"].to_list()
    expect = [f"[file pdf {hashlib.sha256(data).hexdigest()[:12]}]" for data in files]
    assert all(r.endswith(e) for r, e in zip(replies, expect, strict=True)), replies
    takes = capabilities(case.provider).files
    if takes is not None and takes.id_part is not None:
        records = list(Path(storage(case, tmp_path)).glob(f"_uploads/{case.provider}/*.json"))
        assert len(records) == 1, records
        assert stats["files_uploaded"] <= 1 + case.batches, stats  # and the batch files
