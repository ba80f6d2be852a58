"""LiteLLM's executed batches without Prisma: a test-only OpenAI files + batches API whose
batches LiteLLM's own code runs, kept in PostgreSQL in LiteLLM's own schema. Run it with the
Python of LiteLLM's virtualenv (``.ci/run`` installs ``litellm[proxy]``, pinned); it never runs
in Maple's.

Why not LiteLLM's proxy itself: the proxy keeps executed batches in its database through Prisma
(``_litellm_executed_batch_runner`` in ``litellm/proxy/batches_endpoints/endpoints.py`` answers
400 "LiteLLM-executed batches need a database" without a ``PrismaClient``; ``proxy_cli.py`` exits
when a database URL is set and the prisma CLI cannot run), and Prisma's query and schema engines
are downloaded from Prisma's own binary host, which no package registry mirrors: here ``prisma
--version`` stops at ``getaddrinfo ENOTFOUND binaries.prisma.sh``.

LiteLLM's, unchanged: ``LiteLLMExecutedBatchRunner`` (the input file parsed and refused as the
proxy refuses it, each line run through LiteLLM's ``Router`` against the ``hosted_vllm``
deployment, the status moves, the heartbeat, the output and error lines, the lines not run by
the deadline written ``batch_expired`` and the batch ``expired``, cancel, a batch whose runner
stopped failed ``runner_lost`` on the next read), ``ManagedBatchRepository`` (its
compare-and-set status writes, here SQL on the same table), ``resolve_litellm_executed_provider``
(a batch runs in LiteLLM only for a ``hosted_vllm`` server whose ``/files`` answers 404), LiteLLM's
id formats and its database schema (every migration ``litellm-proxy-extras`` ships, applied to
an empty database). Written here: the HTTP routes (as the proxy's: an upload names its model by
the ``x-litellm-model`` header or the ``target_model_names`` form field, a listing is newest
first) and the few SQL statements that stand for Prisma's calls.

Two knobs the proxy does not have: ``--completion-window`` (the runner's own constructor
argument, which the proxy always sets to 24 h; a list gives the batches created in turn their
windows, the last for all after) and ``--stale-after`` (the runner module's
``_STALE_AFTER_SECONDS``, 180 s, after which a batch whose runner stopped beating is failed), so
a test can see lines expire and a stopped runner's batch fail.

    python litellm_batch_server.py --port 4000 --key sk-... --database postgresql://... \\
        --model gemma-3-270m=http://127.0.0.1:8000/v1 [--completion-window 0,86400]
"""

import argparse
import asyncio
import base64
import time
import uuid
from collections.abc import Mapping
from datetime import UTC
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import litellm_proxy_extras
import psycopg
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from litellm import Router
from litellm.models.managed_files import LiteLLM_ManagedFileTable
from litellm.proxy._types import ProxyException, UserAPIKeyAuth
from litellm.proxy.batches_endpoints import litellm_executed_batches as executed
from litellm.proxy.openai_files_endpoints.common_utils import (
    get_models_from_unified_file_id,
    is_base64_encoded_unified_file_id,
)
from litellm.repositories.managed_batch_repository import ManagedBatchRepository
from litellm.types.llms.openai import OpenAIFileObject
from litellm.types.utils import LiteLLMBatch, SpecialEnums
from psycopg.rows import dict_row

STORAGE = "litellm_db"  # the proxy's name for file content kept in its database
OBJECTS = '"LiteLLM_ManagedObjectTable"'
FILES = '"LiteLLM_ManagedFileTable"'
CONTENT = '"LiteLLM_ManagedFileContentTable"'


def _unified(text: str) -> str:
    """An id as LiteLLM's managed files write one: the text, URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _where(where: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """Prisma's ``where`` as SQL: equality, and ``{"lt": value}`` (what LiteLLM's batches use)."""
    terms, values = [], []
    for name, wanted in where.items():
        if isinstance(wanted, Mapping):
            terms.append(f"{name} < %s")
            values.append(wanted["lt"].astimezone(UTC).replace(tzinfo=None))
        else:
            terms.append(f"{name} = %s")
            values.append(wanted)
    return " AND ".join(terms) or "TRUE", values


def _row(found: dict[str, Any]) -> SimpleNamespace:
    """A row as Prisma returns one: attributes, timestamps aware (the columns hold UTC)."""
    for name in ("created_at", "updated_at"):
        found[name] = found[name].replace(tzinfo=UTC)
    return SimpleNamespace(**found)


class Database:
    """LiteLLM's tables in PostgreSQL, and the calls its batch code makes of Prisma's."""

    def __init__(self, connection: psycopg.AsyncConnection[dict[str, Any]]) -> None:
        self.connection = connection
        table = SimpleNamespace(find_first=self.find_first, update_many=self.update_many)
        self.db = SimpleNamespace(litellm_managedobjecttable=table)  # Prisma's client shape
        self.writer_db = self.db

    @classmethod
    async def open(cls, url: str) -> "Database":
        connection = await psycopg.AsyncConnection.connect(
            url, autocommit=True, row_factory=dict_row
        )
        found = await connection.execute("SELECT to_regclass(%s) AS t", (OBJECTS,))
        if (await found.fetchone() or {}).get("t") is None:  # an empty database: LiteLLM's schema
            shipped = Path(litellm_proxy_extras.__file__).parent / "migrations"
            for migration in sorted(p for p in shipped.iterdir() if p.is_dir()):
                await connection.execute((migration / "migration.sql").read_text())  # type: ignore[arg-type]
        return cls(connection)

    async def find_first(self, where: Mapping[str, Any]) -> SimpleNamespace | None:
        clause, values = _where(where)
        found = await self.connection.execute(
            f"SELECT * FROM {OBJECTS} WHERE {clause} LIMIT 1", values
        )  # type: ignore[arg-type]
        row = await found.fetchone()
        return None if row is None else _row(row)

    async def update_many(self, where: Mapping[str, Any], data: Mapping[str, Any]) -> int:
        clause, values = _where(where)
        sets = [f"{name} = %s" + ("::jsonb" if name == "file_object" else "") for name in data]
        sql = f"UPDATE {OBJECTS} SET {', '.join(sets)}, updated_at = now() WHERE {clause}"
        done = await self.connection.execute(sql, [*data.values(), *values])  # type: ignore[arg-type]
        return done.rowcount

    async def batch_ids(self) -> list[str]:
        found = await self.connection.execute(
            f"SELECT unified_object_id FROM {OBJECTS} WHERE file_purpose = 'batch' "
            "ORDER BY created_at DESC, id DESC"
        )
        return [row["unified_object_id"] for row in await found.fetchall()]

    async def keep_file(
        self, name: str, content: bytes, purpose: str, model: str
    ) -> OpenAIFileObject:
        file_id = _unified(
            SpecialEnums.LITELLM_MANAGED_FILE_COMPLETE_STR.value.format(
                "application/jsonl", uuid.uuid4(), model, "", ""
            )
        )
        record = OpenAIFileObject(
            id=file_id, object="file", bytes=len(content), created_at=int(time.time()),
            filename=name, purpose=purpose, status="processed",
        )  # fmt: skip
        content_id = str(uuid.uuid4())
        await self.connection.execute(
            f"INSERT INTO {CONTENT} (id, content) VALUES (%s, %s)", (content_id, content)
        )
        await self.connection.execute(
            f"INSERT INTO {FILES} (id, unified_file_id, file_object, model_mappings, updated_at, "
            "created_by, storage_backend, storage_url) "
            "VALUES (%s, %s, %s::jsonb, '{}'::jsonb, now(), 'default_user_id', %s, %s)",
            (str(uuid.uuid4()), file_id, record.model_dump_json(), STORAGE, content_id),
        )
        return record

    async def files(self, purpose: str | None) -> list[OpenAIFileObject]:
        found = await self.connection.execute(
            f"SELECT file_object FROM {FILES} ORDER BY created_at DESC, id DESC"
        )
        held = [
            OpenAIFileObject.model_validate(row["file_object"]) for row in await found.fetchall()
        ]
        return [record for record in held if purpose in (None, record.purpose)]

    async def content(self, file_id: str) -> bytes | None:
        stored = await self.get_unified_file_id(file_id)
        return None if stored is None else await self.download_file(str(stored.storage_url))

    # -- ManagedBatchStore, the protocol the runner is written against ---------------------
    def get_unified_batch_id(self, batch_id: str, model_id: str) -> str:
        return _unified(
            SpecialEnums.LITELLM_MANAGED_BATCH_COMPLETE_STR.value.format(model_id, batch_id)
        )

    async def get_unified_file_id(
        self, file_id: str, litellm_parent_otel_span: object | None = None
    ) -> LiteLLM_ManagedFileTable | None:
        found = await self.connection.execute(
            f"SELECT * FROM {FILES} WHERE unified_file_id = %s", (file_id,)
        )
        row = await found.fetchone()
        return None if row is None else LiteLLM_ManagedFileTable.model_validate(row)

    async def store_unified_object_id(  # noqa: PLR0917 (the protocol's signature)
        self,
        unified_object_id: str,
        file_object: LiteLLMBatch,
        litellm_parent_otel_span: object | None,
        model_object_id: str,
        file_purpose: str,
        user_api_key_dict: UserAPIKeyAuth,
        request_tags: object = None,
        persist_attribution: bool = False,
        batch_processed: bool = False,
    ) -> None:
        await self.connection.execute(
            f"INSERT INTO {OBJECTS} (id, unified_object_id, model_object_id, file_object, "
            "file_purpose, created_by, updated_by, updated_at, status, batch_processed) "
            "VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s, now(), %s, %s)",
            (str(uuid.uuid4()), unified_object_id, model_object_id, file_object.model_dump_json(),
             file_purpose, user_api_key_dict.user_id, user_api_key_dict.user_id,
             file_object.status, batch_processed),
        )  # fmt: skip

    # -- the storage backend and the result upload the runner is handed --------------------
    def storage_backend(self, backend_type: str, prisma_client: object = None) -> "Database":
        return self

    async def download_file(self, storage_url: str) -> bytes:
        found = await self.connection.execute(
            f"SELECT content FROM {CONTENT} WHERE id = %s", (storage_url,)
        )
        row = await found.fetchone()
        if row is None:
            raise ValueError(f"no stored content {storage_url}")
        return bytes(row["content"])

    async def upload_result(
        self, file_data: Mapping[str, Any], target_model_names: list[str], **_: object
    ) -> OpenAIFileObject:
        content, name = bytes(file_data["content"]), str(file_data["filename"])
        return await self.keep_file(name, content, "batch_output", target_model_names[0])


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    return JSONResponse(body, status_code=status)


def _runners(
    models: Mapping[str, str], database: Database, windows_s: list[float], stale_after_s: float
) -> tuple[Router, ManagedBatchRepository, list[executed.LiteLLMExecutedBatchRunner]]:
    """LiteLLM's router over ``models`` (``hosted_vllm``), its batch repository, and one
    runner for each completion window."""
    executed._STALE_AFTER_SECONDS = stale_after_s  # type: ignore[misc]  # read at each call
    router = Router(
        model_list=[
            {"model_name": name, "litellm_params": {"model": f"hosted_vllm/{name}",
                                                    "api_base": base, "api_key": "none"}}
            for name, base in models.items()
        ]
    )  # fmt: skip
    batches = ManagedBatchRepository(database)
    runners = [
        executed.LiteLLMExecutedBatchRunner(
            llm_router=router, prisma_client=database, managed_files=database,  # type: ignore[arg-type]
            batches=batches, proxy_logging_obj=None, general_settings={},  # type: ignore[arg-type]
            heartbeat_seconds=min(30.0, stale_after_s / 3), completion_window_seconds=window_s,
            storage_backend_factory=database.storage_backend,  # type: ignore[arg-type]
            upload_result_file=database.upload_result,  # type: ignore[arg-type]
        )
        for window_s in windows_s
    ]  # fmt: skip
    return router, batches, runners


def app(
    models: Mapping[str, str],
    key: str,
    database: Database,
    windows_s: list[float],
    stale_after_s: float,
) -> FastAPI:
    router, batches, runners = _runners(models, database, windows_s, stale_after_s)
    caller = UserAPIKeyAuth(api_key=key, user_id="default_user_id")
    server = FastAPI()

    @server.middleware("http")
    async def _auth(request: Request, call_next: Any) -> Response:
        if request.headers.get("authorization") != f"Bearer {key}":
            return _error(401, "Authentication Error, invalid proxy key", "auth_error")
        try:
            answer: Response = await call_next(request)
        except ProxyException as refused:
            return _error(int(refused.code or 500), refused.message, refused.type)
        return answer

    @server.get("/v1/models")
    async def _models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model"} for name in models]}

    @server.post("/v1/files")
    async def _upload(request: Request) -> Response:
        form = await request.form()
        model = request.headers.get("x-litellm-model") or str(form.get("target_model_names") or "")
        if str(form.get("purpose")) != "batch" or model not in models:
            guidance = executed.LITELLM_EXECUTED_BATCH_UPLOAD_GUIDANCE
            return _error(400, f"name the model of a batch input file: {guidance}")
        upload: Any = form["file"]
        record = await database.keep_file(upload.filename, await upload.read(), "batch", model)
        return JSONResponse(record.model_dump(mode="json"))

    @server.get("/v1/files")
    async def _files(purpose: str | None = None, limit: int = 10000) -> dict[str, Any]:
        data = [record.model_dump(mode="json") for record in await database.files(purpose)]
        return {"object": "list", "data": data[:limit], "has_more": len(data) > limit}

    @server.get("/v1/files/{file_id}/content")
    async def _content(file_id: str) -> Response:
        content = await database.content(file_id)
        if content is None:
            return _error(404, f"File {file_id} not found")
        return Response(content, media_type="application/jsonl")

    @server.delete("/v1/files/{file_id}")
    async def _delete(file_id: str) -> dict[str, Any]:  # the content is kept: nothing reads it
        return {"id": file_id, "object": "file", "deleted": True}

    @server.post("/v1/batches")
    async def _create(request: Request) -> Response:
        body = await request.json()
        file_id = str(body.get("input_file_id"))
        decoded = is_base64_encoded_unified_file_id(file_id)
        [model] = get_models_from_unified_file_id(decoded) if decoded else [""]
        if await database.get_unified_file_id(file_id) is None:
            guidance = executed.LITELLM_EXECUTED_BATCH_UPLOAD_GUIDANCE
            return _error(400, f"LiteLLM does not hold input file {file_id}: {guidance}")
        provider = await executed.resolve_litellm_executed_provider(router, model, None)
        if provider is None:
            return _error(
                400, f"LiteLLM runs no batches for {model} (hosted_vllm without a Files API)"
            )
        made = len(await database.batch_ids())  # this batch's window: the list's next
        batch = await runners[min(made, len(runners) - 1)].create(
            create_request=body, unified_input_file_id=file_id, model=model,
            provider=provider, user_api_key_dict=caller, request_tags=None,
        )  # fmt: skip
        return JSONResponse(batch.model_dump(mode="json"))

    async def _load(batch_id: str) -> LiteLLMBatch | None:
        row = await database.find_first({"unified_object_id": batch_id})
        batch = await batches.load_batch(batch_id)
        if (
            row is None
            or batch is None
            or not executed.executed_batch_runner_lost(batch.status, row.updated_at)
        ):
            return batch
        return await runners[-1].fail_abandoned(batch, caller)  # as the proxy's retrieve does

    @server.get("/v1/batches/{batch_id}")
    async def _retrieve(batch_id: str) -> Response:
        batch = await _load(batch_id)
        if batch is None:
            return _error(404, f"Batch {batch_id} not found")
        return JSONResponse(batch.model_dump(mode="json"))

    @server.get("/v1/batches")
    async def _list(limit: int = 20, after: str | None = None) -> dict[str, Any]:
        ids = await database.batch_ids()
        if after in ids:
            ids = ids[ids.index(after) + 1 :]
        page = [await _load(batch_id) for batch_id in ids[:limit]]
        data = [batch.model_dump(mode="json") for batch in page if batch is not None]
        return {
            "object": "list", "data": data, "has_more": len(ids) > limit,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }  # fmt: skip

    @server.post("/v1/batches/{batch_id}/cancel")
    async def _cancel(batch_id: str) -> Response:
        batch = await runners[-1].cancel(batch_id, caller)
        return JSONResponse(batch.model_dump(mode="json"))

    return server


async def serve(args: argparse.Namespace) -> None:
    models = dict(item.split("=", 1) for item in args.model)
    database = await Database.open(args.database)
    windows = [float(window) for window in args.completion_window.split(",")]
    served = app(models, args.key, database, windows, args.stale_after)
    config = uvicorn.Config(served, host="127.0.0.1", port=args.port, log_level="info")
    await uvicorn.Server(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", required=True, help="the key every call must carry")
    parser.add_argument("--database", required=True, help="a PostgreSQL URL (postgresql://...)")
    parser.add_argument("--model", action="append", required=True, help="NAME=BASE_URL (.../v1)")
    parser.add_argument("--completion-window", default="86400", help="seconds[,seconds...]")
    parser.add_argument("--stale-after", type=float, default=180.0)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
