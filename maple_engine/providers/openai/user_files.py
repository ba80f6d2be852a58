"""Files uploaded to OpenAI's Files API for use in requests (purpose ``user_data``: a large PDF
sent by ``file_id``), by the batch API and in real time alike.

An upload is named by its bytes' digest (``maple-<digest>.pdf``) and looked up by that name
and its size among the newest uploads before it is sent, so bytes uploaded once, even by a run
killed before it recorded the id, are not uploaded again. ``user_data`` files do not expire
unless asked to (https://platform.openai.com/docs/api-reference/files/create).
"""

from typing import Any

import httpx

from maple_engine.providers.file_inputs import AttachedFile, UploadedFile
from maple_engine.providers.http import LOOKUP_DEPTH, request

#: The purpose of a file uploaded to be sent in requests by id.
USER_DATA = "user_data"
USER_DATA_QUERY = {"purpose": USER_DATA, "order": "desc", "limit": LOOKUP_DEPTH}


def user_file(
    client: httpx.Client, digest: str, file: AttachedFile, form: dict[str, Any], retries: int
) -> UploadedFile:
    """``file`` uploaded (purpose ``user_data``, with ``form``'s extra fields) under a name
    made of ``digest``: an earlier upload of that name and size if there is one."""
    name = f"maple-{digest[:32]}.pdf"
    found = uploaded(client, name, len(file.data), USER_DATA_QUERY, retries)
    if found is not None:
        return UploadedFile(str(found["id"]))
    form = {**form, "purpose": USER_DATA}
    return UploadedFile(upload(client, name, file.data, form, USER_DATA_QUERY, retries))


def upload(  # noqa: PLR0917  (the file, its form, and how to find it again)
    client: httpx.Client,
    file_name: str,
    data: bytes,
    form: dict[str, Any],
    query: dict[str, Any],
    retries: int,
    what: str = "",
) -> str:
    """The id of ``data`` uploaded as ``file_name`` with ``form`` (its purpose); an upload
    whose answer is lost is looked up by name and size (in ``query``'s listing) before it is
    sent again. ``what``: the upload, as an error names it."""
    mime = "application/jsonl" if file_name.endswith(".jsonl") else "application/pdf"
    answer = request(
        client,
        "POST",
        "/files",
        what=what or f"upload {file_name}",
        max_retries=retries,
        files={"file": (file_name, data, mime)},
        data=form,
        made=lambda: uploaded(client, file_name, len(data), query, retries),
    )
    return str(answer.json()["id"])


def uploaded(
    client: httpx.Client, file_name: str, size: int, query: dict[str, Any], retries: int
) -> dict[str, Any] | None:
    """The file named ``file_name`` of ``size`` bytes among the newest uploaded (of
    ``query``'s listing), if any."""
    listed = request(
        client,
        "GET",
        "/files",
        what=f"look up upload {file_name}",
        max_retries=retries,
        params=query,
    ).json()
    for item in listed.get("data") or []:
        if item.get("filename") == file_name and int(item.get("bytes") or -1) == size:
            return dict(item)
    return None
