"""Run the emulator in the foreground (``serve``) or on a background thread (``EmulatorServer``)."""

import signal
import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

import httpx
import uvicorn

from emulator.app import build_app
from emulator.config import EmulatorConfig
from emulator.core.state import State

_START_TIMEOUT_SECONDS = 15.0


def _uvicorn_config(config: EmulatorConfig, app: Any, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=config.host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=30,
        h11_max_incomplete_event_size=1024 * 1024,
    )


def _listening(host: str, port: int) -> socket.socket:
    """A socket bound to ``port`` (0: one the system picks) and kept: picking a free port,
    closing it and binding it again later lost races to other processes doing the same."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def serve(config: EmulatorConfig) -> None:
    """Serve the emulator in the foreground until interrupted (the ``maple emulator`` command)."""
    state = State(config)
    # uvicorn shuts down on SIGTERM, then raises the signal again with the handler it found: the
    # default one would end the process before ``close`` deletes the files (a 1M-row job's are
    # about 1 GB), so that handler exits through ``finally``.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        uvicorn.Server(_uvicorn_config(config, build_app(config, state), config.port or 8787)).run()
    finally:
        state.close()


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


class EmulatorServer:
    """The emulator on a background thread: ``with EmulatorServer(config) as server: ...``."""

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self.state = State(self.config)
        sock = _listening(self.config.host, self.config.port or 0)
        self.port: int = sock.getsockname()[1]
        self._server = uvicorn.Server(
            _uvicorn_config(self.config, build_app(self.config, self.state), self.port)
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="emulator-server", daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{self.config.host}:{self.port}"

    def start(self) -> Self:
        """Start serving and wait until the port accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"emulator did not start on {self.url}; is the port free?")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and delete the emulator's temporary files."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self.state.close()

    def pause(self) -> None:
        """Stop answering (connections are refused) but keep every batch and counter: an
        outage. `resume` serves the same state on the same port again."""
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def resume(self) -> None:
        self._server = uvicorn.Server(
            _uvicorn_config(self.config, self._server.config.app, self.port)
        )
        sock = _listening(self.config.host, self.port)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="emulator-server", daemon=True
        )
        self.start()

    def stats(self) -> dict[str, Any]:
        """The counters from ``GET /_emulator/stats``."""
        response = httpx.get(f"{self.url}/_emulator/stats", timeout=10)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def reset(self) -> None:
        """Forget all state (``POST /_emulator/reset``)."""
        httpx.post(f"{self.url}/_emulator/reset", timeout=10).raise_for_status()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
