"""What tells a real-time attempt's job errors from its rows' outcomes: first contact, and the
breaker (`maple_engine.send.attempt` raises the errors they find).

- **First contact.** Until a request succeeds, one request is in flight at a time; the others
  wait. Two different requests failing the same way before any succeeded say that the job's
  setup or the service is wrong, not the rows; two different failures are the rows' own, and
  release the others as a success does. An outage's answer (`waited_out`: a 502/503/504/529 or
  408 from a server that is there) says neither: it fails its row within the row's budget and
  the next request tries, one at a time, until the service is back. A URL where nothing
  answers (no connection, a timeout) is a setting to fix, as the batch lane's first call says.
- **The breaker.** Once sending, when none of the last ``WINDOW`` sends succeeded and ``TRIP``
  of them failed the same way, the attempt stops before it spends more. 429s are paced, not
  failed; an outage's answers (`outage_shaped`: no connection, a timeout, 502/503/504/529: the
  request was not served) are retried with backoff, riding the outage out, and never open it.
  A 503 or 529 (`unserved`) is resent for up to the outage window (``MAPLE_OUTAGE_WINDOW_S``)
  without spending the row's budget; the others spend it, as a gateway's 502 or 504 may come
  after the provider billed. A provider failing some of its calls at random does not open it
  either: among 20 sends one succeeds.

Failures are the same when their class, status and message are, request ids aside (a provider
names each failed request in its message).
"""

import asyncio
import collections
import re

from maple_engine.failures import FailureClass

WINDOW = 20  # the breaker looks at this many of the last sends
TRIP = 16  # and opens when this many of them failed the same way
#: A failed send's signature: its class, and the status and message it was answered with
Failure = tuple[str, str]
#: Failure classes whose same failure of two requests says the job, not the row, is wrong
JOB_SHAPED = frozenset({FailureClass.SERVER_ERROR.value, FailureClass.INVALID_REQUEST.value})
_REQUEST_ID = re.compile(
    r"\b(?:req|request)[_-][0-9a-z]{6,}\b|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b",
    re.IGNORECASE,
)


#: Answers of a service that is down or overloaded: the request was not served (nor billed).
OUTAGE_STATUS = ("502:", "503:", "504:", "529:", "408:")
#: Of those, the ones that say so outright (unavailable, overloaded): a gateway's 502 or 504 may
#: come after the provider served and billed the request; these never do.
UNSERVED_STATUS = ("503:", "529:")


def outage_shaped(failure: Failure) -> bool:
    """A failure that says the service is unreachable or down, not that it refused the job."""
    message = failure[1]
    return message.startswith(("transport", "timed out", *OUTAGE_STATUS))


def waited_out(failure: Failure) -> bool:
    """An answer of a service that is there but down or overloaded: ridden out, at first contact
    as once sending (a URL that never answers is not: see `FirstContact`)."""
    return failure[1].startswith(OUTAGE_STATUS)


def unserved(failure: Failure) -> bool:
    """The service said it did not serve the request (unavailable, overloaded): resending it
    costs nothing, so it is resent for as long as an outage lasts, outside the row's budget."""
    return failure[1].startswith(UNSERVED_STATUS)


def failure_of(failure_class: str, message: str) -> Failure:
    """The signature failures are compared by: request ids taken out of the message."""
    return (failure_class, _REQUEST_ID.sub("<id>", message))


class FirstContact:
    """One request at a time until one succeeds (``released``)."""

    def __init__(self) -> None:
        self._turn = asyncio.Condition()
        self.released = False
        self._probing = False
        self._failures: list[Failure] = []

    async def turn(self) -> bool:
        """Wait until a request may go: at once once released; before that, one at a time.
        True: this request is a first contact (tell `answered` how it ended)."""
        async with self._turn:
            await self._turn.wait_for(lambda: self.released or not self._probing)
            if self.released:
                return False
            self._probing = True
            return True

    async def answered(self, failure: Failure | None) -> int | None:
        """A first contact ended (``failure``: how it failed; None: it succeeded). Returns how
        many different requests failed the same way when that stops the job: the requests
        waiting then stay waiting (the caller's error cancels them)."""
        async with self._turn:
            if failure is not None and not waited_out(failure):
                if failure in self._failures and failure[0] in JOB_SHAPED:
                    return len(self._failures) + 1
                self._failures.append(failure)
            self._probing = False
            if failure is None or len(self._failures) >= 2:  # an outage's: the next one tries
                self.released = True
            self._turn.notify_all()
        return None

    async def release(self) -> None:
        """Let every request go (the attempt ended with none of them a job's error)."""
        async with self._turn:
            self.released = True
            self._turn.notify_all()


class Breaker:
    """The last ``WINDOW`` sends' failures (None: answered)."""

    def __init__(self) -> None:
        self.window: collections.deque[Failure | None] = collections.deque(maxlen=WINDOW)

    def watch(self, failure: Failure | None, rate_limited: bool, armed: bool) -> int | None:
        """Count one send; returns how many of the window failed as this one did when that
        opens the breaker (``armed``: only once sending, after first contact)."""
        if rate_limited or (failure is not None and outage_shaped(failure)):
            return None
        self.window.append(failure)
        if failure is None or not armed or len(self.window) < WINDOW or None in self.window:
            return None
        same = sum(1 for seen in self.window if seen == failure)
        return same if same >= TRIP else None
