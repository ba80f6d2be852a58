"""A Ctrl-C that arrives while Dagster runs a step is not lost.

Dagster's in-process execution swaps in its own SIGINT handler, which only sets a flag that it
checks at a few points and forgets when the run ends: a Ctrl-C during a short run would vanish
and the job carry on. A wakeup fd sees every signal whatever the handler, so the driver checks
it between runs and stops.
"""

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def interrupts_seen() -> Iterator[Callable[[], bool]]:
    """Yield ``seen()``: has a SIGINT arrived since the last call (main thread only)?"""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def seen() -> bool:
        try:
            return signal.SIGINT in reader.recv(256)
        except BlockingIOError:
            return False

    try:
        yield seen
    finally:
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
