"""One provider account's rate limit shared by every process sending to the same model.

A real-time pacer learns its account's RPM/TPM from response headers, but the limit belongs to
the account and model, not to the process: N runs sending at once (CLI drivers, Dagster run
workers on other machines) would each pace to the whole limit and send N times it. Each sender
therefore beats (``Share.beat``, every ``beat_s``) where every run sees it, learns N, the live
senders, and paces to 1/N of the limit. Two ways, one interface:

- ``DatabaseShare``: a row per sender in the deployment's database (``$MAPLE_COST_DB``, the
  ledger's; ``maple_engine.ledger.rate_holders``), beaten twice a second on the database's
  clock and counted for 3 s: a dead sender's share comes back within seconds.
- ``RateShare``, when no database is configured: a heartbeat object under the storage root::

    _ratelimits/<provider>/<account>/<model>/<sender>.json

  N being the senders whose heartbeat was written less than ``TTL_S`` ago. That age is read
  on the storage's own clock (S3's ``Last-Modified`` against its ``Date``; a local file's
  mtime), so a host whose clock is off neither lingers in the count nor drops out of it. A
  sender that dies stops renewing and drops out after ``TTL_S``.

``account`` is a digest of the base URL and API key (never the key), so two accounts never
share. A sender that finishes removes itself, so the others speed up at their next beat.
"""

import hashlib
import os
import re
import socket
import uuid
from typing import TYPE_CHECKING, Protocol

from maple_engine.ledger import rate_holders
from maple_engine.storage.layout import join, rate_share_folder
from maple_engine.storage.storage import Storage

BEAT_S = 2.0  # how often a sender renews its heartbeat object and counts the others
TTL_S = 10.0  # a heartbeat object not renewed for this long no longer counts
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")

if TYPE_CHECKING:
    from maple_engine.ledger.costs import CostLedger


def account_digest(base_url: str, api_key: str) -> str:
    return hashlib.sha256(f"{base_url}\x00{api_key}".encode()).hexdigest()[:16]


class Share(Protocol):
    """This process's share of one limit: ``beat`` (every ``beat_s``) counts the live senders
    and ranks this one among them by name (``Pacer.request_share``); ``counted`` tells when the
    others have counted this one (it may send then); ``leave`` gives the share back."""

    beat_s: float
    sender: str

    def beat(self) -> tuple[int, int]: ...

    def counted(self) -> bool: ...

    def leave(self) -> None: ...


def sender_name() -> str:
    """This process, unique among every host's: ``<host>-<pid>-<random>``."""
    return f"{_SAFE.sub('_', socket.gethostname())}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def ranked(live: set[str], sender: str) -> tuple[int, int]:
    """The live senders, ``sender`` among them, and its place in their names' order."""
    names = sorted(live | {sender})
    return len(names), names.index(sender)


def rate_share(
    database_url: str | None, storage_root: str, provider: str, account: str, model: str
) -> Share:
    """The database's share when a database is given, else the storage root's."""
    provider, model = _SAFE.sub("_", provider), _SAFE.sub("_", model) or "_"
    if database_url:
        from maple_engine.ledger.costs import CostLedger  # it imports the provider registry

        return DatabaseShare(CostLedger(database_url=database_url), f"{provider}/{account}/{model}")
    return RateShare(Storage(storage_root), provider, account, model)


class DatabaseShare:
    """This process's share of ``scope``'s limit, a row of the ledger's ``rate_holders``."""

    beat_s = rate_holders.BEAT_S

    def __init__(self, ledger: "CostLedger", scope: str) -> None:
        self.ledger, self.scope = ledger, scope
        self.host = socket.gethostname()
        self.sender = sender_name()

    def beat(self) -> tuple[int, int]:
        with self.ledger.transaction() as conn:
            live = rate_holders.beat(conn, self.scope, self.sender, self.host)
        return ranked(live, self.sender)

    def counted(self) -> bool:
        """Every live sender has beaten since this one's first beat."""
        with self.ledger.transaction() as conn:
            return rate_holders.uncounted(conn, self.scope, self.sender) == 0

    def leave(self) -> None:
        try:
            with self.ledger.transaction() as conn:
                rate_holders.leave(conn, self.scope, self.sender)
        finally:
            self.ledger.close()


class RateShare:
    """This process's share of ``provider``/``model``'s limit on one account, as a heartbeat
    object under the storage root."""

    beat_s = BEAT_S

    def __init__(self, storage: Storage, provider: str, account: str, model: str) -> None:
        self.storage = storage
        self.folder = rate_share_folder(provider, account, model)
        self.sender = sender_name()
        self._key: str | None = None

    def counted(self) -> bool:
        """Every other live sender has written its heartbeat since this one's (asked before
        this one beats again): each listed this one's after writing its own."""
        ages = {sender: age for sender, (_, age) in self._heartbeats().items()}
        mine = ages.pop(self.sender, None)
        return mine is None or all(age < mine for age in ages.values() if age < TTL_S)

    def beat(self) -> tuple[int, int]:
        """Renew this sender's heartbeat; the live senders (>= 1) and this one's rank."""
        self._key = join(self.folder, f"{self.sender}.json")
        self.storage.write_bytes(self._key, b"{}")
        live: set[str] = set()
        for sender, (key, age) in self._heartbeats().items():
            if age < TTL_S:
                live.add(sender)
            elif age > 6 * TTL_S:  # long dead: tidy it away
                self.storage.delete(key)
        return ranked(live, self.sender)

    def _heartbeats(self) -> dict[str, tuple[str, float]]:
        """Each sender's heartbeat: its key and age, on the storage's clock."""
        found = {}
        for key, age in self.storage.ages(self.folder).items():
            if key.endswith(".json"):  # else a write in progress
                sender = key.rsplit("/", 1)[-1].removesuffix(".json").partition("~")[0]
                found[sender] = (key, age)
        return found

    def leave(self) -> None:
        if self._key is not None:
            self.storage.delete(self._key)
            self._key = None
