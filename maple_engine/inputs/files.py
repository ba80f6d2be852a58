"""The files a row sends (``--file-column``): each cell read, typed by its first bytes, checked
against what the provider takes, and made into the provider's own content part.

A cell is a local path, an ``s3://`` key (read with the job's S3 settings from the
environment) or an ``http(s)://`` URL. Local and S3 files are read when the row's request is
encoded, before anything is uploaded: a file that cannot be read, is of no type Maple sends, is
of a kind the provider does not take, or is over the provider's limits stops the job there with
one line naming the row, the file and the limit. A URL is not fetched: it is typed by its
path's extension (`maple_engine.providers.file_types.url_type`; one without a known extension
is taken for an image) and goes as the provider's URL part for that kind
(`FileInputs.url_part`), which the provider fetches; a kind the provider fetches no URL of
stops the job the same way. A URL that fails fails its row (``invalid_file``), checked again
only before a retry (`maple_engine.inputs.images`).

Each row gets its encoded parts (``FILE_PARTS``: every part preceded by a comma, "" for none),
the same as its request key holds them (``FILE_KEY_PARTS``: a file's digest where an upload's
reference goes) and the tokens the provider bills for them (``FILE_TOKENS``, by its own rule).
"""

import hashlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.file_reads import FileReads
from maple_engine.inputs.sources import BLOCK_ROWS, iter_blocks
from maple_engine.inputs.uploads import FileUploads, keyed_ref
from maple_engine.model import FILE_TOKENS, ROW_ID
from maple_engine.providers.file_inputs import AttachedFile, FileInputs
from maple_engine.providers.file_types import HEAD_BYTES, KIND_NAMES, FileKind, sniff, url_type
from maple_engine.providers.registry import capabilities, one_of
from maple_engine.spec import JobSpec
from maple_engine.storage.s3 import S3Settings
from maple_engine.storage.storage import filesystem_for

FILE_PARTS = "_maple_file_parts"
#: The parts a row's request key is computed over: ``FILE_PARTS`` with each upload's reference
#: replaced by its file's digest (`maple_engine.inputs.uploads.keyed_ref`).
FILE_KEY_PARTS = "_maple_file_key_parts"
#: Rows a block of a job with files holds while its requests are encoded (the files' bytes are
#: in them, base64): `block_rows`.
FILE_BLOCK_ROWS = 256
URL_PREFIXES = ("http://", "https://")
KNOWN_TYPES = "a PDF, a PNG, JPEG, WebP or GIF image, or a WAV or MP3 recording"


def block_rows(spec: JobSpec) -> int:
    """Rows of the input read at once to encode ``spec``'s requests: fewer for a job with
    files, whose requests carry them."""
    return FILE_BLOCK_ROWS if spec.file_columns else BLOCK_ROWS


def files_stamp(source: Any, spec: JobSpec, s3: S3Settings | None = None) -> str:
    """A digest of what the input's file cells point at: each local or S3 file's path, size
    and modification time (or ETag), each URL as written. A job's version changes with it, so
    a file changed under the same path is sent again (its request holds the new bytes)."""
    digest = hashlib.sha256()
    columns = list(dict.fromkeys(spec.file_columns))
    for block in iter_blocks(source, BLOCK_ROWS, s3):
        for row in block.select(columns).iter_rows():
            for value in row:
                digest.update(_identity("" if value is None else str(value).strip(), s3))
    return digest.hexdigest()[:32]


def _identity(cell: str, s3: S3Settings | None) -> bytes:
    if not cell or cell.startswith(URL_PREFIXES):
        return cell.encode() + b"\0"
    try:
        fs, path = filesystem_for(cell, s3)
        info = fs.info(path)
    except (OSError, ValueError):  # missing: the encoding says so, in its one line
        return cell.encode() + b":missing\0"
    tag = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("LastModified")
    return f"{cell}:{info.get('size')}:{tag}".encode() + b"\0"


def content_identities(
    block: pl.DataFrame, spec: JobSpec, reads: FileReads | None = None
) -> pl.DataFrame:
    """``block`` with each file cell replaced by what its request part is made from: a local
    or S3 file's name (the last path part, which OpenAI's part names it by) and a digest of
    its bytes, a URL as written. A row's digest over these (`maple_engine.plan.row_digests`)
    is unchanged while its files' bytes are, whatever their paths or modification times; a
    file that cannot be read is its cell (its row is rendered, and refused there). The files
    are read through ``reads`` where given, which keeps them for the block's encoding."""
    if not spec.file_columns:
        return block
    columns = list(dict.fromkeys(spec.file_columns))
    seen: dict[str, str] = {}
    reads = reads or FileReads(held=0)

    def identity(value: Any) -> str | None:
        cell = None if value is None else str(value).strip()
        if not cell or cell.startswith(URL_PREFIXES):
            return cell
        if cell not in seen:
            try:
                digest = hashlib.sha256(reads.read(cell)).hexdigest()
            except (OSError, ValueError):
                digest = "unreadable"
            seen[cell] = f"{cell.rstrip('/').rsplit('/', 1)[-1]}:{digest}"
        return seen[cell]

    return block.with_columns(
        pl.Series(c, [identity(v) for v in block.get_column(c)], dtype=pl.String) for c in columns
    )


def provider_files(spec: JobSpec) -> FileInputs:
    """What the job's provider takes as files; one that takes none is refused, naming those
    that do."""
    files = capabilities(spec.provider).files
    if files is None:
        raise ConfigError(
            f"--provider {spec.provider} sends text and image URLs only, not files "
            f"(--file-column {spec.file_columns[0]}): use "
            f"{one_of(lambda c: c.files is not None)}."
        )
    if spec.endpoint != "chat":
        raise ConfigError(
            f"--file-column {spec.file_columns[0]} sends files as chat completion parts: drop "
            f"--endpoint {spec.endpoint}."
        )
    return files


def attached(  # noqa: PLR0917  (the cell, where it is, and what reads it)
    row: int, column: str, cell: str, spec: JobSpec, files: FileInputs, reads: FileReads
) -> AttachedFile:
    """The file of one cell, read and checked (`ConfigError` naming the row and the file)."""
    where = f"Row {row}, --file-column {column}: {cell[:200]}"
    try:
        data = reads.read(cell)
    except (OSError, ValueError) as exc:  # missing, unreadable, no such bucket or key
        raise ConfigError(
            f"{where} cannot be read ({type(exc).__name__}: {str(exc)[:200]}): fix the path "
            "or the file, or clear the cell."
        ) from None
    kind = sniff(data)
    if kind is None:
        raise ConfigError(
            f"{where} is not {KNOWN_TYPES} (it begins {data[:HEAD_BYTES]!r}): send one of "
            "those, or clear the cell."
        )
    if kind.kind not in files.kinds:
        raise ConfigError(
            f"{where} is {KIND_NAMES[kind.kind]} ({kind.mime}), which --provider "
            f"{spec.provider} does not take: use "
            f"{one_of(lambda c: c.files is not None and kind.kind in c.files.kinds)}."
        )
    return AttachedFile(name=cell.rstrip("/").rsplit("/", 1)[-1], type=kind, data=data)


def check_size(
    where: str, file: AttachedFile, by_id: bool, spec: JobSpec, files: FileInputs
) -> None:
    """`ConfigError` for a file over the provider's per-file limit: its encoded size inline,
    its bytes uploaded."""
    size, limit = (len(file.data) if by_id else file.encoded_bytes), files.max_bytes(file.type.kind)
    if size > limit:
        sent = "uploaded" if by_id else "encoded"
        raise ConfigError(
            f"{where} is {size:,} bytes {sent}, over --provider {spec.provider}'s limit of "
            f"{limit:,} bytes per file ({KIND_NAMES[file.type.kind]}; {files.docs}): shrink or "
            "split the file."
        )


def row_parts(  # noqa: PLR0917  (the row, what it sends, and how its files are had)
    row: int,
    cells: dict[str, Any],
    spec: JobSpec,
    files: FileInputs,
    uploads: FileUploads | None,
    reads: FileReads,
) -> tuple[str, str, int]:
    """One row's encoded parts as sent and as keyed (each part preceded by a comma; they
    differ where a file goes by its upload's reference, which the keyed parts hold as the
    file's digest) and their tokens; a file the provider takes by id goes up through
    ``uploads`` where given."""
    sent: list[dict[str, Any]] = []
    keyed: list[dict[str, Any]] = []
    tokens = 0
    counts: Counter[FileKind] = Counter()
    read: list[tuple[str, AttachedFile]] = []
    for column, value in cells.items():
        cell = "" if value is None else str(value).strip()
        if not cell:
            continue
        if cell.startswith(URL_PREFIXES):
            part, kind = url_part(row, column, cell, spec, files)
            sent.append(part)
            keyed.append(part)
            tokens += files.url_tokens(kind)
            counts[kind] += 1
            continue
        read.append(
            (
                f"Row {row}, --file-column {column}: {cell[:200]}",
                attached(row, column, cell, spec, files, reads),
            )
        )
    by_id = files.sent_by_id([file for _, file in read]) if uploads is not None else set()
    encoded = 0
    for index, (where, file) in enumerate(read):
        counts[file.type.kind] += 1
        check_size(where, file, index in by_id, spec, files)
        tokens += files.tokens(file)
        encoded += files.request_bytes(file, index in by_id)
        if index in by_id and uploads is not None and files.id_part is not None:
            sent.append(files.id_part(uploads.file_ref(file), file))
            keyed.append(files.id_part(keyed_ref(file), file))
        else:
            sent.append(files.part(file))
            keyed.append(sent[-1])
    _check_request(row, cells, spec, files, encoded, counts)
    return _joined(sent), _joined(keyed) if by_id else "", tokens


def _joined(parts: list[dict[str, Any]]) -> str:
    return "".join("," + orjson.dumps(part).decode() for part in parts)


def _check_request(  # noqa: PLR0917  (the row, what it sends, and what it adds up to)
    row: int,
    cells: dict[str, Any],
    spec: JobSpec,
    files: FileInputs,
    encoded: int,
    counts: Counter[FileKind],
) -> None:
    """`ConfigError` for a row whose files are over the provider's per-request limits."""
    if encoded > files.max_request_bytes:
        raise ConfigError(
            f"Row {row}'s files ({', '.join(str(v) for v in cells.values() if v)[:300]}) add "
            f"up to {encoded:,} bytes sent, over --provider {spec.provider}'s limit of "
            f"{files.max_request_bytes:,} bytes per request ({files.docs}): send fewer or "
            "smaller files per row."
        )
    for kind, most in files.kind_counts:
        if counts[kind] > most:
            raise ConfigError(
                f"Row {row} has {counts[kind]} {KIND_NAMES[kind]}, over --provider "
                f"{spec.provider}'s limit of {most} a request ({files.docs}): send fewer per "
                "row."
            )


def url_part(
    row: int, column: str, cell: str, spec: JobSpec, files: FileInputs
) -> tuple[dict[str, Any], FileKind]:
    """A URL cell's part, which the provider fetches, and the kind its extension names (an
    image without a known one)."""
    where = f"Row {row}, --file-column {column}: {cell[:200]}"
    if files.url_part is None:
        raise ConfigError(
            f"{where} is a URL, and --provider {spec.provider} fetches none: give a local path "
            "or an s3:// key, or use "
            f"{one_of(lambda c: c.files is not None and c.files.url_part is not None)}."
        )
    type_ = url_type(cell)
    kind: FileKind = "image" if type_ is None else type_.kind
    if kind not in files.url_kinds:
        raise ConfigError(
            f"{where} is a URL of {KIND_NAMES[kind]} (by its extension), and --provider "
            f"{spec.provider} fetches no URL of {KIND_NAMES[kind]} ({files.docs}): give a "
            "local path or an s3:// key (Maple sends the bytes), or use "
            f"{one_of(lambda c: c.files is not None and kind in c.files.url_kinds)}."
        )
    return files.url_part(cell, type_), kind


def _rows(block: pl.DataFrame, columns: list[str]) -> Iterator[dict[str, Any]]:
    return block.select(ROW_ID, *columns).iter_rows(named=True)


def with_files(
    block: pl.DataFrame,
    spec: JobSpec,
    uploads: FileUploads | None = None,
    reads: FileReads | None = None,
) -> pl.DataFrame:
    """``block`` (with ``ROW_ID``) plus each row's encoded file parts and their tokens (the
    files the provider takes by id uploaded through ``uploads``; None: every file inline;
    files read through ``reads``, which may hold them from the block's plan); the block as it
    is for a job without file columns."""
    if not spec.file_columns:
        return block
    files = provider_files(spec)
    columns = list(dict.fromkeys(spec.file_columns))
    reads = reads or FileReads()
    made = [
        row_parts(row.pop(ROW_ID), row, spec, files, uploads, reads)
        for row in _rows(block, columns)
    ]
    return block.with_columns(
        pl.Series(FILE_PARTS, [sent for sent, _, _ in made], dtype=pl.String),
        pl.Series(FILE_KEY_PARTS, [keyed or sent for sent, keyed, _ in made], dtype=pl.String),
        pl.Series(FILE_TOKENS, [tokens for _, _, tokens in made], dtype=pl.Int64),
    )
