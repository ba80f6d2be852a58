"""A Ctrl-C that arrives while Dagster runs a step is not lost.

Dagster's in-process execution swaps in its own SIGINT handler, which only sets a flag that it
checks at a few points and forgets when the run ends: a Ctrl-C during a short run would vanish
and the job carry on. A wakeup fd sees every signal whatever the handler, so the driver checks
it between runs and stops.

Dagster's handler raises its interrupt error wherever the main thread is, which may be inside a
garbage-collection callback (SQLAlchemy's, for one): Python cannot raise it there and prints
"Exception ignored in ..." with a traceback. While the driver watches for SIGINT itself, such
interrupts are dropped silently; every other unraisable error still reaches the usual hook.
"""

import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

INTERRUPTS = (KeyboardInterrupt, dg.DagsterExecutionInterruptedError)


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
    hook = sys.unraisablehook

    def quiet_interrupts(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, INTERRUPTS):
            hook(unraisable)

    sys.unraisablehook = quiet_interrupts

    def seen() -> bool:
        try:
            return signal.SIGINT in reader.recv(256)
        except BlockingIOError:
            return False

    try:
        yield seen
    finally:
        sys.unraisablehook = hook
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
