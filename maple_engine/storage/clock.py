"""The one clock leases and claims read, and the check that it agrees with the storage's.

Leases are judged on the storage's own clock (an S3 object's ``Last-Modified`` against the
``Date`` of the same service, a local file's mtime against this kernel), so hosts whose clocks
disagree still agree on when a lease lapsed. What this host's clock still decides (the times a
lease record shows, real-time heartbeats' expiry) must agree with the storage's within a quarter
of the lease TTL; a host further off is refused before it takes a lease.

``MAPLE_CLOCK_OFFSET_S`` (a `maple_engine.settings` knob) shifts this host's clock by that many
seconds, so tests can run hosts whose clocks are off.
"""

import time

from maple_engine.errors import ConfigError
from maple_engine.settings import knob

OFFSET_ENV = "MAPLE_CLOCK_OFFSET_S"
TOLERATED_SHARE = 0.25  # of the lease TTL: how far a host's clock may be off the storage's


class ClockSkew(ConfigError):
    """This host's clock is further off the storage's clock than leases tolerate."""


def now() -> float:
    """This host's time (epoch seconds), shifted by ``MAPLE_CLOCK_OFFSET_S`` when set."""
    return time.time() + float(knob(OFFSET_ENV) or 0.0)


def check_skew(local: float, server: float, ttl_s: float, where: str, slack_s: float) -> None:
    """Refuse a host whose clock (``local``) is more than a quarter of ``ttl_s`` off the
    storage's (``server``, read at the same moment, to within ``slack_s``)."""
    skew = local - server
    tolerated = TOLERATED_SHARE * ttl_s
    if abs(skew) <= tolerated + slack_s:
        return
    side = "ahead of" if skew > 0 else "behind"
    raise ClockSkew(
        f"this host's clock is {abs(skew):.1f} s {side} the storage's clock ({where}); leases "
        f"tolerate {tolerated:.1f} s (a quarter of the lease TTL, {ttl_s:g} s), so two drivers "
        "could run at once. Synchronise this host's clock with NTP (chronyd or "
        "systemd-timesyncd) and run again."
    )
