"""Files sent by id instead of their bytes (`FileInputs.sent_by_id`: OpenAI's large PDFs,
Gemini's files past its inline limit): each distinct file uploaded once while its upload lives.

An upload is kept under the storage root by a digest of the file's bytes
(``_uploads/<provider>/<sha256>.json``: the provider's reference, the bytes, and when the
provider deletes it, if it does), so every row, job and rerun that sends the same bytes sends
the same upload. One that expires (Gemini keeps files 48 hours) is reused only while it has
half its life or a day left (`UploadedFile.reusable`), and uploaded again after. The
provider's uploader names the upload by that digest and looks it up before anything goes up,
so a run killed between the upload and the record does not upload it again. A dry run
uploads nothing: it sends a stand-in reference of about the same length.

A request's key is computed over the request as keyed (`keyed_ref`: the file's digest where the
reference goes), never over the reference sent, so a file uploaded again under a new
reference leaves its rows' keys, and their stored answers, as they were.

Uploads happen as the rows are encoded, so a job stopped by a later row's check leaves the
earlier rows' files uploaded (its rerun sends those). A file deleted at the provider before
its record says is not uploaded again while the record lives: its row fails there.
"""

import dataclasses
import time
from typing import Any, Protocol, runtime_checkable

from maple_engine.crashpoints import crash_point
from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.storage.storage import Storage

UPLOADS = "_uploads"  # beside the jobs, which no job name can be


@runtime_checkable
class Uploader(Protocol):
    """A provider that uploads files for use in requests: ``digest`` (the bytes' SHA-256)
    names the upload, so an earlier one of the same bytes is found instead of sent again."""

    def upload_user_file(self, digest: str, file: AttachedFile) -> UploadedFile: ...


def keyed_ref(file: AttachedFile) -> str:
    """What a request's key holds where an uploaded file's reference goes: its content."""
    return f"sha256:{file.digest}"


@dataclasses.dataclass(frozen=True)
class FileUploads:
    """The uploads of the files a job sends by id, at ``provider`` (the name that keeps them
    apart under ``storage``); ``uploader`` None: a dry run, nothing uploaded."""

    storage: Storage
    provider: str
    uploader: Uploader | None
    _known: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict, compare=False)

    def file_ref(self, file: AttachedFile) -> str:
        """``file``'s reference at the provider: known in this run, recorded and alive, found
        by the uploader, or uploaded now."""
        digest = file.digest
        if self.uploader is None:
            return f"file-{digest[:24]}"  # a dry run's stand-in, as long as OpenAI's ids
        key = f"{UPLOADS}/{self.provider}/{digest}.json"
        record = self._known.get(digest)
        if record is None and self.storage.exists(key):
            record = self.storage.read_json(key)
        if record is None or not _upload(record).reusable(time.time()):
            uploaded = self.uploader.upload_user_file(digest, file)
            crash_point("file_uploaded")
            record = {"id": uploaded.ref, "bytes": len(file.data)}
            record |= {"expires": uploaded.expires, "created": uploaded.created}
            self.storage.write_json(key, record)
        self._known[digest] = record
        return str(record["id"])


def _upload(record: dict[str, Any]) -> UploadedFile:
    """An upload as recorded (one recorded without an expiry never expires)."""
    expires, created = record.get("expires"), record.get("created")
    return UploadedFile(
        str(record["id"]),
        None if expires is None else float(expires),
        None if created is None else float(created),
    )


def file_uploads(
    storage: Storage, provider: str, wire: object, *, dry_run: bool = False
) -> FileUploads | None:
    """The job's uploads where its provider uploads files (for a dry run, stand-in
    references), else None (every file inline)."""
    if not isinstance(wire, Uploader):
        return None
    return FileUploads(storage, provider, None if dry_run else wire)
