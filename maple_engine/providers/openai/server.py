"""``--provider openai-server``: an OpenAI-compatible server a team runs itself (vLLM, SGLang,
llama.cpp, TGI, an embeddings server), through the real-time engine.

Where it differs from OpenAI's API: the base URL is the team's (``MAPLE_BASE_URL``, required), a
key only if the server wants one (``MAPLE_API_KEY``); first contact is ``GET /models``, which
must list the job's model; no rate-limit headers are expected (the in-flight bound climbs to
the server's throughput knee, `maple_engine.send.pacing.CapacityProbe`, up to
``max_concurrency``); a model the price file does not price is booked at $0, its source
"self-hosted: no API price"; and a response schema goes in the ``response_format`` form the
server takes (``schema_format``: OpenAI's strict ``json_schema``, or ``json_object`` with the
schema, as llama.cpp's Python server takes it), found by one probe request at first contact
when the job does not say.
"""

from typing import Any, ClassVar, Literal, Self

import httpx
import orjson
import polars as pl
from pydantic import Field

from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, EMBEDDING
from maple_engine.providers.base import Dialect, ProviderCapabilities, RequestSpec
from maple_engine.providers.http import error_detail, make_client
from maple_engine.providers.openai import params, wire
from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider
from maple_engine.providers.realtime import realtime_capabilities

NAME = "openai-server"
CAPABILITIES = realtime_capabilities(
    Dialect.OPENAI,
    NAME,
    "maple",
    kinds=frozenset({CHAT, EMBEDDING}),
    self_hosted=True,
    rules=params.RULES,
)
FIRST_CONTACT_TIMEOUT_S = 60.0  # a busy server (a killed run's requests still queued) answers late
PROBE_TIMEOUT_S = 120.0  # a model server's first answer may wait for its model to load
AUTO = "auto"
PROBE_SCHEMA_NAME = "response"
JSON_BODY = {"Content-Type": "application/json"}


class OpenAIServerProvider(OpenAIRealtimeProvider):
    """An OpenAI-compatible server you run: ``/chat/completions`` and ``/embeddings`` at
    ``base_url``, one row (or several rows' texts) a request."""

    capabilities: ClassVar[ProviderCapabilities] = CAPABILITIES

    name: str = Field(default=NAME, description="Provider name in costs/output.")
    model: str | None = Field(
        default=None, description="The job's model, checked against the server's /models."
    )
    initial_concurrency: int = Field(
        default=8, description="Requests in flight at first (a server sends no rate limits)."
    )
    schema_format: Literal["auto", "json_schema", "json_object"] = Field(
        default="auto",
        description="How a response schema is asked for: 'json_schema' (OpenAI's strict form), "
        "'json_object' with the schema (llama.cpp's Python server), or 'auto': the first the "
        "server takes, probed once before any row is sent (`maple enrich`).",
    )

    def resolved_base_url(self) -> str:
        if not self.base_url:
            raise ConfigError(
                f"--provider {NAME} needs your server's URL: set MAPLE_BASE_URL (e.g. "
                "http://127.0.0.1:8000/v1), or pass base_url to the provider."
            )
        return self.base_url.rstrip("/")

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def bound_to(self, model: str) -> "OpenAIServerProvider":
        return self if self.model == model else self.model_copy(update={"model": model})

    def body_expr(
        self,
        spec: RequestSpec,
        user: pl.Expr,
        image: pl.Expr | None,
        files: pl.Expr | None = None,
    ) -> pl.Expr:
        form = wire.JSON_SCHEMA if self.schema_format == AUTO else self.schema_format
        return wire.body_expr(spec, user, image, form, files)

    def settle_schema_format(self, schema: dict[str, Any]) -> Self:
        """This provider with the ``response_format`` form the server takes for ``schema``: the
        configured one, else the first of OpenAI's strict form and llama.cpp's ``json_object``
        that a one-token request is answered without an error; a `ConfigError` when neither."""
        if self.schema_format != AUTO:
            return self
        refusals = []
        base = self.resolved_base_url()
        with make_client(base, self.request_headers(), PROBE_TIMEOUT_S) as client:
            for form in (wire.JSON_SCHEMA, wire.JSON_OBJECT):
                body = {
                    "model": self.model,
                    "messages": [{"role": "user", "content": "Answer in JSON."}],
                    "max_tokens": 1,
                    "response_format": wire.response_format(schema, PROBE_SCHEMA_NAME, form),
                    **self.extra_body,
                }
                try:
                    response = client.post(
                        "/chat/completions", content=orjson.dumps(body), headers=JSON_BODY
                    )
                except httpx.TransportError as exc:
                    raise ConfigError(
                        f"The server at {base} did not answer a request with a response schema "
                        f"({type(exc).__name__}): is it still running?"
                    ) from exc
                if response.status_code < 400:
                    return self.model_copy(update={"schema_format": form})
                refusals.append(f"{form}: HTTP {response.status_code} {error_detail(response)[0]}")
        raise ConfigError(
            f"The server at {base} takes a response schema in neither form ("
            + "; ".join(refusals)
            + "): drop --response-schema, or ask for JSON in the prompt."
        )

    def check_endpoint(self) -> None:
        """``GET /models`` once: the server answers and serves the job's model."""
        served = served_models(self.resolved_base_url(), self.request_headers())
        if self.model is not None and self.model not in served:
            listed = ", ".join(sorted(served)) or "none"
            raise ConfigError(
                f"The server at {self.resolved_base_url()} does not serve model "
                f"{self.model!r}; it serves: {listed}. Give --model one of them."
            )


def served_models(base_url: str, headers: dict[str, str]) -> set[str]:
    """The model ids the server at ``base_url`` lists; a `ConfigError` naming the fix when it
    cannot be reached, refuses the key, or does not answer like an OpenAI-compatible API."""
    url = f"{base_url}/models"
    with make_client(base_url, headers, FIRST_CONTACT_TIMEOUT_S) as client:
        try:
            response = client.get("/models")
        except httpx.TransportError as exc:
            raise ConfigError(
                f"No server answers at {url} ({type(exc).__name__}): start it, or fix "
                "MAPLE_BASE_URL (it points at the API, e.g. http://127.0.0.1:8000/v1)."
            ) from exc
    if response.status_code in {401, 403}:
        raise ConfigError(
            f"The server at {url} refused the request ({response.status_code}): set "
            "MAPLE_API_KEY to the key it expects."
        )
    try:
        body = orjson.loads(response.content) if response.status_code < 400 else None
    except orjson.JSONDecodeError:
        body = None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ConfigError(
            f"{url} does not answer like an OpenAI-compatible server (HTTP "
            f"{response.status_code}): MAPLE_BASE_URL must point at its API, e.g. ending in /v1."
        )
    return {str(m["id"]) for m in data if isinstance(m, dict) and "id" in m}
