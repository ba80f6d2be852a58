"""Files sent by id instead of their bytes (`FileInputs.sent_by_id`: OpenAI's PDFs over
``UPLOAD_OVER``): each distinct file uploaded once.

A file's id is kept under the storage root by a digest of its bytes
(``_uploads/<provider>/<sha256>.json``), so every row, job and rerun that sends the same bytes
sends the same id, and its request key stays the same. The upload is named by that digest
(``maple-<digest>.pdf``) and looked up by name before anything goes up, so a run killed between
the upload and the record does not upload it again. A dry run uploads nothing: it sends a
stand-in id of the same length, as many bytes and tokens as the real one.

Uploads happen as the rows are encoded, so a job stopped by a later row's check leaves the
earlier rows' files uploaded (its rerun sends those ids). A file deleted at the provider
since is not uploaded again while its record holds its id: its row fails there.
"""

import dataclasses
import hashlib
from typing import Protocol, runtime_checkable

from maple_engine.crashpoints import crash_point
from maple_engine.providers.file_inputs import AttachedFile
from maple_engine.storage.storage import Storage

UPLOADS = "_uploads"  # beside the jobs, which no job name can be


@runtime_checkable
class Uploader(Protocol):
    """A provider that uploads files for use in requests."""

    def upload_user_file(self, file_name: str, data: bytes) -> str: ...


@dataclasses.dataclass(frozen=True)
class FileUploads:
    """The ids of the files a job sends by id, at ``provider`` (the name that keeps them
    apart under ``storage``); ``uploader`` None: a dry run, nothing uploaded."""

    storage: Storage
    provider: str
    uploader: Uploader | None

    def file_id(self, file: AttachedFile) -> str:
        """``file``'s id at the provider: recorded, found by name, or uploaded now."""
        digest = hashlib.sha256(file.data).hexdigest()
        if self.uploader is None:
            return f"file-{digest[:24]}"  # a dry run's stand-in, as long as OpenAI's ids
        key = f"{UPLOADS}/{self.provider}/{digest}.json"
        if self.storage.exists(key):
            return str(self.storage.read_json(key)["id"])
        file_id = self.uploader.upload_user_file(f"maple-{digest[:32]}.pdf", file.data)
        crash_point("file_uploaded")
        self.storage.write_json(key, {"id": file_id, "bytes": len(file.data)})
        return file_id


def file_uploads(
    storage: Storage, provider: str, wire: object, *, dry_run: bool = False
) -> FileUploads | None:
    """The job's uploads where its provider uploads files (for a dry run, stand-in ids),
    else None (every file inline)."""
    if not isinstance(wire, Uploader):
        return None
    return FileUploads(storage, provider, None if dry_run else wire)
