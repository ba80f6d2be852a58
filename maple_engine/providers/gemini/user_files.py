"""Files uploaded to Gemini's Files API for use in requests (a file past the inline limit sent
as ``fileData``), by the Batch API and in real time alike.

Gemini keeps an uploaded file 48 hours, then deletes it
(https://ai.google.dev/gemini-api/docs/files: "Files are stored for 48 hours"; each file's
``expirationTime`` says when). A ``File``'s name may be chosen at create: up to 40 lowercase
letters, digits or dashes after ``files/`` (https://ai.google.dev/api/files#File), so an upload
is named by its bytes' digest (``files/maple-<digest>``) and got by that name before anything
goes up: bytes uploaded once, even by a run killed before it recorded the upload, go up again
only once that file is deleted or too near its end to send (`UploadedFile.reusable`; then it
is deleted and uploaded afresh under the same name).
"""

import time
from datetime import datetime
from typing import Any

import httpx

from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.providers.gemini.api import delete_file, get_file, resumable_upload
from maple_engine.providers.gemini.file_parts import gemini_mime


def file_name(digest: str) -> str:
    """The Files API name of the bytes of SHA-256 ``digest``: 40 characters after ``files/``."""
    return f"files/maple-{digest[:34]}"


def user_file(client: httpx.Client, digest: str, file: AttachedFile, retries: int) -> UploadedFile:
    """``file`` uploaded under its digest's name: the one there if it lives long enough."""
    name = file_name(digest)
    found = get_file(client, name, retries)
    if found is not None:
        if _usable(found):
            return uploaded(found)
        delete_file(client, name, retries)
    meta = {"name": name, "displayName": file.name[:512]}
    mime = gemini_mime(file.type)
    made = resumable_upload(
        client, file.data, meta, mime, f"{file.name} as {name}", retries,
        made=lambda: get_file(client, name, retries),
    )  # fmt: skip
    return uploaded(made)


def uploaded(file: dict[str, Any]) -> UploadedFile:
    """A ``File``'s URI (what a ``fileData`` part names), when it is deleted and made."""
    expires, created = file.get("expirationTime"), file.get("createTime")
    return UploadedFile(
        str(file["uri"]),
        _epoch(str(expires)) if expires else None,
        _epoch(str(created)) if created else None,
    )


def _usable(file: dict[str, Any]) -> bool:
    """Whether a found ``File`` may be sent: not failed, and reusable for its life left."""
    return file.get("state") != "FAILED" and uploaded(file).reusable(time.time())


def _epoch(stamp: str) -> float:
    """An RFC 3339 time (``Z`` or an offset, up to 9 fractional digits) in epoch seconds."""
    return datetime.fromisoformat(stamp).timestamp()
