"""The platform's exception tree.

Every message names what went wrong, where (job, shard, row, URL without secrets) and what to do.

    MapleError
    ├── ConfigError          bad input or settings, found before anything is uploaded
    ├── StorageError         the storage root cannot be read or written
    ├── ProviderError        a provider call failed after the polite retries
    │   ├── SetupRefused     the provider refused the job's setup: nothing more is sent
    │   │   └── AuthError    the provider rejected the credentials
    │   ├── BreakerOpen      most recent requests failed the same way: sending stopped
    │   └── QueueFull        the provider's batch queue refused a new batch (try later)
    ├── QuotaExhausted       the provider reports insufficient quota: new submissions stop
    └── CanaryFailed         too few of the canary's rows succeeded: no batch was created
"""


class MapleError(Exception):
    """Base of every error the platform raises on purpose."""


class ConfigError(MapleError, ValueError):
    """The job's input, template or settings are unusable; nothing was submitted."""


class StorageError(MapleError):
    """The storage root could not be read or written."""


class ProviderError(MapleError):
    """A provider call failed after retries; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class SetupRefused(ProviderError):
    """The provider (or a gateway before it) refused a request for the job's setup, not for
    the row: the API key, a header the gateway requires, the model, a parameter or the response
    format. Every request would be refused the same way, so the job stops (``maple``: exit 2)
    and no row is failed for it: the rerun after the fix sends them."""


class AuthError(SetupRefused):
    """The provider rejected the API key (401/403)."""


class BreakerOpen(ProviderError):
    """Most of the last requests failed the same way (the same status and message), or a
    batch's results were answered the same failure again and again: the job stopped before it
    spent more (``maple``: exit 4). The message names the error, the URL without secrets and
    the count."""


class ReplyMismatch(ProviderError):
    """A reply that cannot fit the job (an embedding of another length than ``--dimensions``
    asked): the job stopped at the first one and kept none of them (``maple``: exit 4), so a
    rerun after the fix sends those rows."""


class QueueFull(ProviderError):
    """The provider refused a new batch because its batch queue is full; nothing was created.

    The batch waits locally and goes out once earlier batches end (`maple_engine.submit.queue`)."""


class QuotaExhausted(MapleError):
    """The provider reports insufficient quota; the job stops submitting new batches."""


class CanaryFailed(MapleError):
    """Too few of the canary's rows succeeded (`maple_engine.canary`); no batch of the job
    was created. The message names the top failure class and one example row."""
