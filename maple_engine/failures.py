"""The failure taxonomy and the mapping of provider outcomes onto it.

The classes and their default retries: docs/architecture.md, "Failures and retries". A row that
no resend can change (an image that is gone, a prompt a provider blocks before generating, an
answer a gateway may have billed) is marked ``resendable`` False in its result row
(``RESULT_SCHEMA``) and is never sent again, whatever its class allows; its error says so in
words, which no code reads.
"""

import enum


class FailureClass(enum.StrEnum):
    EXPIRED = "expired"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    REFUSED = "refused"
    INVALID_IMAGE = "invalid_image"
    INVALID_FILE = "invalid_file"  # a --file-column URL the provider could not fetch
    INVALID_OUTPUT = "invalid_output"
    INVALID_REQUEST = "invalid_request"
    INSUFFICIENT_QUOTA = "insufficient_quota"
    #: a batch that says it ran every request (completed) has no line for this one in its output
    #: or error file: resent, like ``expired``
    MISSING = "missing"


#: Error codes that blame the batch service, not the request: a line that never ran with one,
#: or a batch that failed with one, is a ``server_error`` and sent again. ``runner_lost`` is
#: LiteLLM's for a batch it runs itself whose proxy replica stopped before it finished ("resubmit
#: the batch"; ``litellm/proxy/batches_endpoints/litellm_executed_batches.py``); ``internal_error``
#: is its code for a batch whose runner raised.
SERVICE_FAILURE_CODES = frozenset({"server_error", "internal_error", "runner_lost"})

_IMAGE_CODES = {"invalid_image_url", "invalid_image", "image_parse_error", "invalid_image_format"}


def classify_http(
    status: int, code: str | None = None, error_type: str | None = None
) -> FailureClass:
    """Class of an HTTP-level failure from its status and the error envelope's code/type."""
    code = code or ""
    error_type = error_type or ""
    if code == "insufficient_quota" or error_type in {"insufficient_quota", "billing_error"}:
        return FailureClass.INSUFFICIENT_QUOTA
    if code in _IMAGE_CODES or "image" in code:
        return FailureClass.INVALID_IMAGE
    if status == 429 or code == "rate_limit_exceeded" or error_type == "rate_limit_error":
        return FailureClass.RATE_LIMITED
    if status in {408, 409} or status >= 500 or error_type in {"api_error", "overloaded_error"}:
        return FailureClass.SERVER_ERROR
    if code == "content_filter" or error_type == "content_filter":
        return FailureClass.REFUSED
    return FailureClass.INVALID_REQUEST


def classify_line_error(code: str | None) -> FailureClass:
    """Class of an OpenAI batch line that never ran (``response: null``, ``error.code``)."""
    if code in {"batch_expired", "batch_cancelled", "batch_canceled"}:
        return FailureClass.EXPIRED
    if code in {"rate_limit_exceeded", "token_limit_exceeded"}:
        return FailureClass.RATE_LIMITED
    if code == "insufficient_quota":
        return FailureClass.INSUFFICIENT_QUOTA
    if code in SERVICE_FAILURE_CODES:
        return FailureClass.SERVER_ERROR
    return FailureClass.INVALID_REQUEST


#: Batch-level validation errors that mean "the file is too big": split it and resend.
TOO_LARGE_CODES = frozenset(
    {"too_many_tasks", "file_too_large", "too_many_requests", "max_file_size_exceeded"}
)


def batch_too_large(codes: tuple[str, ...], messages: tuple[str, ...]) -> bool:
    """Did a batch fail validation because it had too many requests or bytes?"""
    if TOO_LARGE_CODES & set(codes):
        return True
    text = " ".join(messages).lower()
    return "too many requests" in text or "too large" in text or "exceeds the" in text
