"""How many requests a provider's token bucket holds now, learned from its rate-limit headers.

A bucket of capacity C refilled at r requests a second reports with each answer what is left of
it as a share of the per-minute limit (remaining / limit = level / C) and the time until it is
full again (reset = (C - level) / r): together they give C = reset x r / (1 - share) and the
level when the request was admitted. The level now is that one, plus the refill since (at most
up to C), less every request booked after that one was sent. A bucket, unlike a fixed window,
keeps what was not used: the pacer spends the level above half the bucket to take back the
slots a stalled event loop lost (even pacing takes back one), and keeps the other half for the
jitter of requests on their way; only while the last ``AGREE`` answers' capacities agree
(within ``SPREAD``: the remaining count is rounded). Whether the limiter is a bucket at all is
the ``WindowClock``'s to tell (its resets move on with the sends); the pacer asks for the room
only then.
"""

import collections

from maple_engine.providers.realtime import RateLimits

AGREE = 4
SPREAD = 1.5


class BucketLevel:
    """The learned capacity of the provider's request bucket, and its level over time."""

    def __init__(self) -> None:
        self.capacity: float | None = None  # the least of the recent estimates
        self._estimates: collections.deque[float] = collections.deque(maxlen=AGREE)
        self._rate = 0.0  # requests a second
        self._level = 0.0  # at ``_at``, counting the bookings up to ``_booked``
        self._at = 0.0
        self._booked = 0

    def learn(
        self, limits: RateLimits, sent_at: float, sent: collections.deque[float], booked: int
    ) -> None:
        """One answer's headers, for a request sent at ``sent_at``; ``sent`` the moments of
        the latest bookings (in order), ``booked`` how many there have been in all."""
        limit, remaining = limits.rpm, limits.remaining_requests
        reset = limits.reset_requests
        if not limit or remaining is None or reset is None or remaining > limit:
            return
        self._rate = limit / 60
        share = remaining / limit
        if share < 1 and reset > 0:
            self._estimates.append(reset * self._rate / (1 - share))
            self.capacity = min(self._estimates)
        if self.capacity is None:
            return
        since = 0
        for moment in reversed(sent):
            if moment <= sent_at:
                break
            since += 1
        self._level = share * self.capacity - since
        self._at, self._booked = sent_at, booked

    def room(self, now: float, booked: int) -> float:
        """Requests the bucket holds now above half its capacity (0 until it is learned)."""
        agree = len(self._estimates) == AGREE and max(self._estimates) <= SPREAD * min(
            self._estimates
        )
        if self.capacity is None or not agree:
            return 0.0
        level = min(self.capacity, self._level + (now - self._at) * self._rate)
        return level - (booked - self._booked) - self.capacity / 2
