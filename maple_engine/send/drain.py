"""A stop that waits for what it paid: Ctrl-C while real-time requests are in flight.

The requests in flight have been sent, and the provider bills each when it answers. Dropping
them at a Ctrl-C paid for answers no one kept, and the rerun paid for them again. So the first
Ctrl-C during a real-time attempt asks the attempt to drain (`DRAIN.request()`): it sends
nothing more, waits at most `DRAIN_S` for the requests in flight, keeps their answers in its
checkpoints, then interrupts the command as a Ctrl-C does (exit 130). A second Ctrl-C stops at
once, as before. With no attempt sending, a Ctrl-C stops at once.

A job error found while sending (the breaker, a setup refusal, a reply that cannot fit) drains
the attempt the same way (`maple_engine.send.attempt`).
"""

import contextlib
import threading
from collections.abc import Iterator

#: How long a drain waits for the requests in flight before it stops regardless.
DRAIN_S = 15.0


class Drain:
    """Whether an attempt is sending, and whether a Ctrl-C asked it to drain."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._sending = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """An attempt sends while this is held."""
        with self._lock:
            self._sending += 1
        try:
            yield
        finally:
            with self._lock:
                self._sending -= 1

    def request(self) -> bool:
        """Ask the attempts sending to drain; False when none is sending (nothing to wait for)."""
        with self._lock:
            if self._sending == 0 or self.requested.is_set():
                return False
            self.requested.set()
            return True


DRAIN = Drain()
