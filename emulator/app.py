"""The starlette application: routes for both providers plus the ``/_emulator`` admin API."""

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator import admin_routes, anthropic_routes, openai_routes, realtime_routes
from emulator.azure import AzureRoutes
from emulator.bedrock_routes import BEDROCK_ROUTES
from emulator.config import EmulatorConfig
from emulator.gateway import GatewayMiddleware
from emulator.gemini_app import GEMINI_ROUTES
from emulator.http_common import JSONResponse, provider_error, state_of
from emulator.mistral import MISTRAL_ROUTES
from emulator.state import State

logger = logging.getLogger(__name__)


async def stats(request: Request) -> Response:
    """``GET /_emulator/stats``: counters (see ``emulator.state.Stats``)."""
    return JSONResponse(state_of(request).stats.snapshot())


async def reset(request: Request) -> Response:
    """``POST /_emulator/reset``: forget all files, batches, counters and attempts."""
    state_of(request).reset()
    return JSONResponse({"reset": True})


async def health(request: Request) -> Response:
    """``GET /_emulator/health``."""
    return JSONResponse({"ok": True})


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    messages = {
        404: f"Unknown request URL: {request.method} {request.url.path}.",
        405: f"Method {request.method} is not allowed for {request.url.path}.",
    }
    return provider_error(request, status, messages.get(status, "Bad request."))


async def _crash(request: Request, exc: Exception) -> Response:
    """The one boundary for unexpected errors: log them and answer a provider-shaped 500."""
    logger.error("emulator request %s %s failed", request.method, request.url.path, exc_info=exc)
    return provider_error(request, 500, "The emulator hit an internal error; see its log.")


ROUTES = [
    *admin_routes.ADMIN_ROUTES,
    *GEMINI_ROUTES,
    *BEDROCK_ROUTES,
    *MISTRAL_ROUTES,
    Route("/v1/models", openai_routes.list_models, methods=["GET"]),
    Route("/v1/files", openai_routes.create_file, methods=["POST"]),
    Route("/v1/files", openai_routes.list_files, methods=["GET"]),
    Route("/v1/files/{file_id}", openai_routes.get_file, methods=["GET"]),
    Route("/v1/files/{file_id}", openai_routes.delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", openai_routes.file_content, methods=["GET"]),
    Route("/v1/batches", openai_routes.create_batch, methods=["POST"]),
    Route("/v1/batches", openai_routes.list_batches, methods=["GET"]),
    Route("/v1/batches/{batch_id}", openai_routes.get_batch, methods=["GET"]),
    Route("/v1/batches/{batch_id}/cancel", openai_routes.cancel_batch, methods=["POST"]),
    Route("/v1/chat/completions", realtime_routes.openai_realtime, methods=["POST"]),
    Route("/v1/responses", realtime_routes.openai_realtime, methods=["POST"]),
    Route("/v1/embeddings", realtime_routes.openai_realtime, methods=["POST"]),
    Route("/v1/messages", realtime_routes.anthropic_messages, methods=["POST"]),
    Route("/v1/messages/batches", anthropic_routes.create_batch, methods=["POST"]),
    Route("/v1/messages/batches", anthropic_routes.list_batches, methods=["GET"]),
    Route("/v1/messages/batches/{batch_id}", anthropic_routes.get_batch, methods=["GET"]),
    Route("/v1/messages/batches/{batch_id}", anthropic_routes.delete_batch, methods=["DELETE"]),
    Route(
        "/v1/messages/batches/{batch_id}/cancel", anthropic_routes.cancel_batch, methods=["POST"]
    ),
    Route(
        "/v1/messages/batches/{batch_id}/results", anthropic_routes.batch_results, methods=["GET"]
    ),
    Route("/_emulator/stats", stats, methods=["GET"]),
    Route("/_emulator/reset", reset, methods=["POST"]),
    Route("/_emulator/health", health, methods=["GET"]),
]


def build_app(config: EmulatorConfig, state: State | None = None) -> Starlette:
    """A starlette app serving ``config``; ``app.state.emulator`` holds its ``State``."""
    app = Starlette(
        routes=ROUTES,
        exception_handlers={HTTPException: _http_error, Exception: _crash},
    )
    app.state.emulator = state or State(config)
    if config.required_headers or config.required_body_fields or config.gateway_nulls:
        app.add_middleware(
            GatewayMiddleware,
            required=config.required_headers,
            nulls=config.gateway_nulls,
            fields=config.required_body_fields,
        )
    app.add_middleware(AzureRoutes)  # the outermost: the others see the OpenAI paths
    return app
