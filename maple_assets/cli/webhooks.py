"""``maple webhooks``: receive the batch events providers push, and record them for the drivers.

One path per provider that pushes (``/webhooks/<name>``; OpenAI: ``/webhooks/openai``, its
secret in ``OPENAI_WEBHOOK_SECRET``). Each delivery is verified (signature, timestamp within the
tolerance), answered at once, and its batch's end recorded under the storage root
(`maple_engine.storage.batch_events`), where the enrichment sensor and `maple enrich` find it on
their next look and poll that batch without waiting for their poll interval. A forged or stale
delivery is answered 400, a replayed ``webhook-id`` 200; neither changes anything, and the log
line names the path, the delivery's id and why, never its body or signature.
"""

import logging
import socket
import sys
import threading
import time
from typing import Any

import click

from maple_engine.errors import ConfigError
from maple_engine.providers.pushed import EventWire, RefusedEvent
from maple_engine.providers.registry import PUSHED_EVENTS
from maple_engine.settings import Settings, webhook_secret_env
from maple_engine.storage.batch_events import BatchEvents
from maple_engine.storage.storage import Storage

logger = logging.getLogger("maple.webhooks")
MAX_BODY_BYTES = 64 * 1024  # a batch event is a few hundred bytes
PRUNE_EVERY_S = 3600.0


class Receiver:
    """One provider's path: its wire, its key and where its events are recorded."""

    def __init__(self, name: str, wire: EventWire, key: bytes, storage: Storage) -> None:
        self.name = name
        self.wire = wire
        self.key = key
        self.events = BatchEvents(storage, name)
        self._pruned = 0.0
        self._lock = threading.Lock()

    def take(self, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        """Verify and record one delivery: the status to answer and what happened."""
        delivery = _printable(headers.get("webhook-id", ""))
        try:
            webhook_id = self.wire.verify(self.key, headers, body, time.time())
            event = self.wire.batch_event(webhook_id, body)
        except RefusedEvent as refused:
            return 400, f"refused delivery {delivery!r} to /webhooks/{self.name}: {refused}"
        if event is None:
            return 200, f"delivery {delivery!r}: not a batch event, ignored"
        if not self.events.record(event.webhook_id, event.batch_id, event.type):
            return 200, f"replay of delivery {delivery!r} ignored"
        self._prune()
        return 200, f"{event.type}: batch {event.batch_id} (delivery {delivery!r})"

    def _prune(self) -> None:
        with self._lock:
            if time.monotonic() - self._pruned < PRUNE_EVERY_S and self._pruned:
                return
            self._pruned = time.monotonic()
        self.events.prune()


def _printable(value: str) -> str:
    return "".join(c for c in value[:80] if c.isprintable())


def receivers(settings: Settings, storage: Storage) -> dict[str, Receiver]:
    """A receiver for every provider that pushes; ConfigError when none has its secret set."""
    found = {}
    for name, wire in PUSHED_EVENTS.items():
        secret = settings.webhook_secret(name)
        if secret is not None:
            found[name] = Receiver(name, wire, wire.signing_key(secret), storage)
    if not found:
        wanted = ", ".join(
            f"{webhook_secret_env(n)}, {w.secret_help}" for n, w in PUSHED_EVENTS.items()
        )
        raise ConfigError(f"no webhook signing secret is set: export {wanted}")
    return found


def build_app(by_name: dict[str, Receiver]) -> Any:
    """The starlette app: ``POST /webhooks/<provider>``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def receive(request: Request) -> Response:
        receiver = by_name.get(request.path_params["provider"])
        if receiver is None:
            return JSONResponse({"error": "no provider pushes events to this path"}, 404)
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            logger.warning(
                "refused a delivery of %d bytes to /webhooks/%s", len(body), receiver.name
            )
            return JSONResponse({"error": "too large"}, 413)
        headers = {k.lower(): v for k, v in request.headers.items()}
        status, line = await run_in_threadpool(receiver.take, headers, body)
        (logger.info if status < 300 else logger.warning)(line)
        return JSONResponse({"received": status < 300}, status)

    return Starlette(routes=[Route("/webhooks/{provider}", receive, methods=["POST"])])


def _listening(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port or --host"
        ) from None
    sock.listen(128)  # deliveries wait in the backlog while the server starts
    return sock


@click.command("webhooks")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8788, show_default=True, type=int, help="Port to listen on.")
@click.option(
    "--storage",
    help="Storage root the events are recorded under (default: MAPLE_STORAGE, or ./.maple).",
)
def webhooks_command(host: str, port: int, storage: str | None) -> None:
    """Receive the batch events providers push (OpenAI's at /webhooks/openai, signed with
    OPENAI_WEBHOOK_SECRET) and record them under the storage root: jobs waiting for those
    batches collect them at once instead of at their next poll."""
    import uvicorn

    settings = Settings.load(storage=storage)
    root = Storage(settings.storage_root)
    by_name = receivers(settings, root)
    sock = _listening(host, port)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    bound = sock.getsockname()[1]
    paths = ", ".join(f"/webhooks/{n}" for n in by_name)  # one URL per provider
    click.echo(
        f"maple webhooks on http://{host}:{bound}: {paths}; recorded under {root.root}", err=True
    )
    config = uvicorn.Config(
        build_app(by_name), log_level="warning", access_log=False, lifespan="off"
    )
    uvicorn.Server(config).run(sockets=[sock])
