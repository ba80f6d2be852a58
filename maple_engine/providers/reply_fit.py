"""What a reply must be to fit its job, whatever the provider, and when one that does not stops
a real-time attempt before it spends more (`maple_engine.send.attempt` raises
`maple_engine.errors.ReplyMismatch` with the reason; the rows are not kept, so the rerun after
the fix sends them):

- **A vector of another length** than ``--dimensions`` can never fit: the first stops.
- **An embedding job's reply that is not a vector** (a chat server behind the base URL, a
  gateway routing to the wrong model): the first stops.
- **With ``--response-schema``, a reply that does not match it** is its row's failure
  (``invalid_output``, resent under the retry policy: models slip). But until one reply has
  matched, two rows' replies that do not say the server or model ignores the response format,
  and the job stops: resending every row under the retry policy would pay for each again. A
  batch whose replies (two or more) all fail the schema stops the job the same way
  (`maple_engine.collect.responses.schema_misfit`), its rows sent again on the rerun.
"""

import base64
import binascii
import dataclasses
from collections.abc import Sequence
from typing import Any

import jsonschema
import jsonschema_rs
import orjson

from maple_engine.providers.vectors import misfit, misfit_reason

#: Replies that fail the schema before any matched, from different rows, that stop the job
SCHEMA_STRIKES = 2


class SchemaCheck:
    """jsonschema-rs decides (compiled, ~26x faster); the rare invalid reply is explained with
    jsonschema's best-matching error, so messages stay the same."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.fast = jsonschema_rs.Draft202012Validator(schema)
        self.schema = schema

    def problem(self, text: str | None) -> str | None:
        """Why ``text`` does not match the schema; None when it does."""
        try:
            value = orjson.loads(text or "")
        except orjson.JSONDecodeError as exc:
            return f"the reply is not JSON: {exc}"
        if self.fast.is_valid(value):
            return None
        slow = jsonschema.Draft202012Validator(self.schema)
        error = jsonschema.exceptions.best_match(slow.iter_errors(value))
        if error is None:
            return None
        return f"the reply does not match the response schema: {error.message}"


@dataclasses.dataclass(frozen=True)
class ReplyFit:
    """What a job's replies must be: a vector (of ``dimensions`` values when given) for an
    embedding job, a match of ``schema`` where the job has one."""

    embedding: bool = False
    dimensions: int | None = None
    schema: dict[str, Any] | None = None


#: A job whose replies are not checked (a canary judges its own)
ANY_REPLY = ReplyFit()


class FitWatch:
    """One attempt's replies against its job's `ReplyFit`."""

    def __init__(self, fit: ReplyFit) -> None:
        self.fit = fit
        self.schema = SchemaCheck(fit.schema) if fit.schema is not None else None
        self.matched = False  # a reply has matched the schema
        self.strikes: list[str] = []  # the problems of replies that did not, before one did

    def stop_reason(self, rows: Sequence[dict[str, Any]]) -> str | None:
        """Why these rows' replies stop the job; None when they do not."""
        answered = [r for r in rows if r.get("status") == "succeeded"]
        if not answered:
            return None
        if self.fit.embedding:
            return self._vector_misfit(answered)
        if self.schema is None or self.matched:
            return None
        for row in answered:
            problem = self.schema.problem(row.get("response"))
            if problem is None:
                self.matched = True
                return None
            self.strikes.append(problem)
            if len(self.strikes) >= SCHEMA_STRIKES:
                return schema_ignored(len(self.strikes), problem)
        return None

    def _vector_misfit(self, rows: Sequence[dict[str, Any]]) -> str | None:
        for row in rows:
            if not is_vector(row.get("response")):
                text = " ".join(str(row.get("response") or "").split())[:80]
                return (
                    f"the provider answered text ({text!r}) where an embedding was asked: the "
                    "base URL or the model serves chat, not embeddings. No such reply is kept: "
                    "point the job at an embeddings model or API, then rerun the same command"
                )
        if self.fit.dimensions is None:
            return None
        values = misfit(rows, self.fit.dimensions)
        return misfit_reason(values, self.fit.dimensions) if values is not None else None


def schema_ignored(count: int, problem: str) -> str:
    """Why ``count`` replies, none matching the schema (the last: ``problem``), stop the job."""
    return (
        f"{count} different rows' replies did not match --response-schema before any did "
        f"({problem}): the server or model ignores the response format. No such reply is kept: "
        "send to a model or server that takes a JSON schema (or check the schema), then rerun "
        "the same command"
    )


def is_vector(response: Any) -> bool:
    """``response`` is a base64 float32 vector (what an embedding row's response holds)."""
    if not isinstance(response, str) or not response or len(response) % 4:
        return False
    try:
        raw = base64.b64decode(response, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) % 4 == 0
