"""The starlette application: each provider's routes (``emulator/<provider>/routes.py``) plus the
``/_emulator`` admin API; Azure's paths are a middleware over OpenAI's."""

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.anthropic import routes as anthropic
from emulator.azure.routes import AzureRoutes
from emulator.bedrock import routes as bedrock
from emulator.bedrock_openai import routes as bedrock_openai
from emulator.config import EmulatorConfig
from emulator.core.gateway import GatewayMiddleware
from emulator.core.http_common import JSONResponse, provider_error, state_of
from emulator.core.state import State
from emulator.gemini import routes as gemini
from emulator.mistral import routes as mistral
from emulator.openai import routes as openai
from emulator.openrouter import routes as openrouter

logger = logging.getLogger(__name__)


async def stats(request: Request) -> Response:
    """``GET /_emulator/stats``: counters (see ``emulator.core.state.Stats``)."""
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


#: Each provider's routes, in this order (the Gemini routes dispatch a few ``/v1`` paths they share
#: with OpenAI's, so they come first), then the emulator's own.
ROUTES = [
    *gemini.ROUTES,
    *bedrock.ROUTES,
    *bedrock_openai.ROUTES,
    *openrouter.ROUTES,
    *mistral.ROUTES,
    *openai.ROUTES,
    *anthropic.ROUTES,
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
