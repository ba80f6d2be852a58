"""Mistral's wire: where its calls go, how its batch lines and jobs look, and how its result
lines read. The chat bodies and replies are OpenAI's (`maple_engine.providers.openai.wire`).

- ``MISTRAL_BASE_URL`` is the host part before ``/v1`` (default `DEFAULT_BASE_URL`); every
  path is under ``{host}/v1``; the key (``MISTRAL_API_KEY``) is a bearer token.
- A batch input line is ``{"custom_id": ..., "body": {...}}``: no ``method`` or ``url``, as
  the endpoint and the model are the job's (``POST /v1/batch/jobs``). The body keeps its
  ``model`` (Mistral takes it there too), so a deadline's real-time fallback sends the same
  encoded bodies.
- An embedding job's lines go to ``/v1/embeddings`` (the job's ``endpoint``); their body is
  Mistral's embeddings body: ``model``, ``input``, ``encoding_format: "float"`` (the one format
  every version of its API documents) and ``output_dimension`` for ``--dimensions`` (taken by
  ``codestral-embed``, up to 3,072; ``mistral-embed`` makes 1,024 values and takes none). The
  reply is OpenAI's ``list`` of ``data[].embedding`` with ``usage.prompt_tokens``.
- A job's status is one of `STATUSES`; each maps onto the engine's batch states.
- A result line is OpenAI's shape (``custom_id``, ``response`` with ``status_code`` and
  ``body``, or ``error``), but a failed line's ``body`` is a JSON string holding Mistral's error
  object (``{"object": "error", "message": ..., "type": ..., "code": ...}``).
"""

from typing import Any

import orjson
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.failures import classify_http, classify_line_error
from maple_engine.model import EMBEDDING, ENDED_STATES, BatchState
from maple_engine.providers.base import MB, ModelFamily, ProviderLimits, RequestSpec
from maple_engine.providers.lost import LOST
from maple_engine.providers.openai import wire as openai_wire

CREDENTIALS = "mistral"  # MISTRAL_API_KEY, MISTRAL_BASE_URL
KEY_ENV = "MISTRAL_API_KEY"
DEFAULT_BASE_URL = "https://api.mistral.ai"
CHAT_ENDPOINT = "/v1/chat/completions"
EMBEDDINGS_ENDPOINT = "/v1/embeddings"
#: Mistral's embedding models: codestral-embed shortens its vectors (``output_dimension``, up to
#: 3,072), mistral-embed makes 1,024 values and takes no dimension.
MODELS = (
    ModelFamily("codestral-embed", EMBEDDING, max_dimensions=3072),
    ModelFamily("mistral-embed", EMBEDDING, shortens=False),
)
# The documentation gives a batch up to 1M requests on one page and 100,000 requests and
# 512 MB on its limitations page: the smaller figures hold under both.
LIMITS = ProviderLimits(max_requests=100_000, max_bytes=512 * MB)
#: ``timeout_hours`` of a job, as ``--completion-window`` names it (24 by default, up to 7 days)
WINDOWS = ("24h", "48h", "72h", "168h")
# A line is ``{"custom_id":"...","body":{...}}``.
LINE_HEAD = '{"custom_id":'
LINE_MID = ',"body":'
#: Mistral's job statuses -> the engine's batch states
STATUSES = {
    "QUEUED": "validating",
    "RUNNING": "in_progress",
    "SUCCESS": "completed",
    "FAILED": "failed",
    "TIMEOUT_EXCEEDED": "expired",
    "CANCELLATION_REQUESTED": "cancelling",
    "CANCELLED": "cancelled",
}


def api_url(base_url: str | None) -> str:
    """The prefix of every path: ``{host}/v1`` (a host given with ``/v1`` is taken as it is)."""
    host = (base_url or DEFAULT_BASE_URL).rstrip("/").removesuffix("/v1")
    return f"{host}/v1"


def bearer(api_key: str | None) -> dict[str, str]:
    """The bearer header; a `ConfigError` naming ``MISTRAL_API_KEY`` without a key."""
    if not api_key:
        raise ConfigError(
            f"{KEY_ENV} is not set: export your Mistral API key (or pass api_key to the "
            "provider resource)."
        )
    return {"Authorization": f"Bearer {api_key}"}


def body_expr(spec: RequestSpec, user: pl.Expr, image: pl.Expr | None) -> pl.Expr:
    """The encoded body of every row: OpenAI's chat completion, or Mistral's embeddings body
    (``output_dimension``, vectors as JSON floats)."""
    if spec.kind == EMBEDDING:
        return openai_wire.embedding_body_expr(
            spec, user, dimensions="output_dimension", encoding="float"
        )
    return openai_wire.body_expr(spec, user, image)


def timeout_hours(window: str) -> int:
    """A completion window (``24h``) as the job's ``timeout_hours``."""
    if window not in WINDOWS:
        raise ConfigError(f"--completion-window {window!r}: Mistral takes {', '.join(WINDOWS)}.")
    return int(window.removesuffix("h"))


def job_state(job: dict[str, Any]) -> BatchState:
    """A batch job object as the engine's `BatchState` (an unknown status is still running)."""
    raw = str(job.get("status", ""))
    status = LOST if raw == LOST else STATUSES.get(raw.upper(), raw.lower() or "in_progress")
    errors = [e for e in job.get("errors") or [] if isinstance(e, dict)]
    return BatchState(
        batch_id=str(job["id"]),
        status=status,
        ended=status in ENDED_STATES,
        errors=tuple(str(e.get("message", "")) for e in errors),
        error_codes=tuple(str(e.get("code", "")) for e in errors),
        completed=int(job.get("succeeded_requests") or 0),
        failed=int(job.get("failed_requests") or 0),
        total=int(job.get("total_requests") or 0),
        times=tuple(
            (phase, float(job[key]))
            for phase, key in (
                ("created", "created_at"),
                ("in_progress", "started_at"),
                ("ended", "completed_at"),
            )
            if job.get(key)
        ),
    )


def parse_line(line: dict[str, Any]) -> dict[str, Any]:
    """One output or error line -> a result row (success only with a 2xx response)."""
    custom_id = line.get("custom_id")
    response = line.get("response")
    error = line.get("error")
    if not isinstance(response, dict):
        detail: dict[str, Any] = (
            error if isinstance(error, dict) else {"message": str(error or "no response")}
        )
        code = detail.get("code")
        return openai_wire.failed_row(
            custom_id, classify_line_error(code), detail.get("message") or code
        )
    body = _decoded(response.get("body"))
    status = int(response.get("status_code") or 0)
    if error is not None or not 200 <= status < 300:
        nested = body.get("error")
        detail = nested if isinstance(nested, dict) else body
        code = detail.get("code")
        cls = classify_http(status, str(code) if code is not None else None, detail.get("type"))
        return openai_wire.failed_row(custom_id, cls, detail.get("message") or f"HTTP {status}")
    return openai_wire.parse_reply(custom_id, body)


def _decoded(body: Any) -> dict[str, Any]:
    """A line's ``body``: an object, or a JSON string holding one (a failed line's)."""
    if isinstance(body, str):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return {"message": body}
    return body if isinstance(body, dict) else {}
