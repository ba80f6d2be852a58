"""The Gemini API's routes, under ``/v1beta`` and ``/v1`` (google-genai 3.x calls ``v1``).

Under ``/v1`` a few paths are also OpenAI's (``GET /v1/batches``, ``/v1/batches/{id}``,
``/v1/files/{id}``): a request carrying Google's credentials (``x-goog-api-key`` or ``?key=``)
goes to the Gemini handler, any other to OpenAI's.
"""

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.gemini import batch_routes as batches
from emulator.gemini import file_routes as files
from emulator.openai import routes as openai_routes

Handler = Callable[[Request], Awaitable[Response]]


def is_gemini(request: Request) -> bool:
    """Whether the request carries Google's API-key credentials."""
    return bool(request.headers.get("x-goog-api-key") or request.query_params.get("key"))


def _either(gemini: Handler, openai: Handler) -> Handler:
    async def route(request: Request) -> Response:
        return await (gemini if is_gemini(request) else openai)(request)

    route.__doc__ = gemini.__doc__
    return route


def _shared(version: str, gemini: Handler, openai: Handler) -> Handler:
    return gemini if version == "v1beta" else _either(gemini, openai)


def _routes(version: str) -> list[Route]:
    v = f"/{version}"
    return [
        Route(f"/upload{v}/files", files.upload, methods=["POST"]),
        Route(f"{v}/files/{{file_id}}:download", files.download_file, methods=["GET"]),
        Route(f"/download{v}/files/{{file_id}}:download", files.download_file, methods=["GET"]),
        Route(
            f"{v}/files/{{file_id}}",
            _shared(version, files.get_file, openai_routes.get_file),
            methods=["GET"],
        ),
        Route(
            f"{v}/files/{{file_id}}",
            _shared(version, files.delete_file, openai_routes.delete_file),
            methods=["DELETE"],
        ),
        Route(f"{v}/models/{{model}}:batchGenerateContent", batches.create_batch, methods=["POST"]),
        Route(f"{v}/models/{{model}}:generateContent", batches.generate_content, methods=["POST"]),
        Route(
            f"{v}/models/{{model}}:asyncBatchEmbedContent",
            batches.create_embed_batch,
            methods=["POST"],
        ),
        Route(f"{v}/models/{{model}}:batchEmbedContents", batches.embed_contents, methods=["POST"]),
        Route(
            f"{v}/batches",
            _shared(version, batches.list_batches, openai_routes.list_batches),
            methods=["GET"],
        ),
        Route(f"{v}/batches/{{batch_id}}:cancel", batches.cancel_batch, methods=["POST"]),
        Route(
            f"{v}/batches/{{batch_id}}",
            _shared(version, batches.get_batch, openai_routes.get_batch),
            methods=["GET"],
        ),
        Route(f"{v}/batches/{{batch_id}}", batches.delete_batch, methods=["DELETE"]),
    ]


#: Gemini routes; the app lists them before OpenAI's so the dispatching ones match first.
ROUTES = [*_routes("v1beta"), *_routes("v1")]
