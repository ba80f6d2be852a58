"""Queue-aware submission: keep the provider's batch queue full, never past its limit.

OpenAI limits the prompt tokens enqueued in batches per model and organization; Anthropic the
requests waiting in the Message Batches queue. Before a shard attempt is sent, it asks the
shared queue budget in the ledger (`maple_engine.ledger.queues`) for room: its units
(estimated
prompt tokens, or requests for Anthropic) must fit under the limit with everything already
enqueued by every job on the same provider and model, and the teams waiting share the room by
weight. Shards that do not fit wait locally and go out as earlier batches end.

The limit is ``max_enqueued_tokens`` (``--max-enqueued-tokens``) when given, else the one learned
from the provider and kept under the storage root (``_queues/<provider>/<model>.json``): from the
first batch that fails with ``token_limit_exceeded`` (its message carries the limit), or from
an Anthropic 429. Until an OpenAI limit is known, a batch goes out only when every batch already
in the queue has passed validation, so at most one batch fails while the limit is learned;
what the queue was seen to hold is remembered (``proven``), and up to it batches go out at once.
A run may send its shards as a ``Chain``: each waits inside the run for the run's batch before it
to pass validation, as it would wait for the sensor's next tick, without one tick and one run
per shard. With a deadline, a chain gives up as soon as the deadline is due or one of its shards
could not end as a batch in time (`maple_engine.submit.escalation`): the sensor then sends
those through the late lanes at once, instead of the chain holding them.
"""

import dataclasses
import re
import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from maple_engine.errors import ConfigError, QueueFull, StorageError
from maple_engine.ledger.queues import (
    Decision,
    Slot,
    admit_slot,
    forget_waiting,
    holders,
    mark,
    mark_sent,
    refused,
    release_others,
    release_slot,
    validated_units,
)
from maple_engine.model import BatchState, StopKind, Submission, is_realtime
from maple_engine.plan.estimate import kept_estimate
from maple_engine.providers.base import ShardPayload
from maple_engine.settings import knob
from maple_engine.storage.claims import driver_gone
from maple_engine.storage.layout import queue_file
from maple_engine.storage.storage import Storage
from maple_engine.submit.escalation import escalate_waiting, in_flight, is_late

if TYPE_CHECKING:
    from maple_engine.job import Job
    from maple_engine.work import Work

TEAM_WEIGHTS_ENV = "MAPLE_TEAM_WEIGHTS"
LIMIT_CODE = "token_limit_exceeded"
COOLDOWN_S = 15.0  # after the provider refused a batch although the limit seemed to allow it
_LIMIT = re.compile(r"Limit:\s*([\d,]+)\s*enqueued tokens", re.IGNORECASE)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_VALIDATING = ("validating", "created")  # batch statuses before the provider's validation
LATE = "rt"  # the ticket of a shard sent through the deadline's late lane


@dataclasses.dataclass(frozen=True)
class Queue:
    """The provider queue a job's batches go into."""

    provider: str
    model: str
    unit: str  # tokens | requests
    probe: bool  # learn an unknown limit one validated batch at a time

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def key(self) -> str:
        return queue_file(_SAFE.sub("_", self.provider), _SAFE.sub("_", self.model))


def deadline_due(job: "Job") -> bool:
    """Whether the job's deadline is due: its attempts go real-time, nothing waits to queue."""
    return job.deadline_due()


def queue_of(job: "Job") -> Queue | None:
    """The queue the job's batches go into, or None when no queue limit applies."""
    if job.mode != "batch" or job.costs is None:
        return None
    name, model = job.wire.provider_name, job.spec.model
    queue = job.wire.capabilities.queue
    if queue == "requests":
        return Queue(name, model, "requests", probe=False)
    if queue == "enqueued-tokens":
        return Queue(name, model, "tokens", probe=True)
    if job.spec.max_enqueued_tokens is not None:
        return Queue(name, model, "tokens", probe=False)
    return None


def parse_limit(messages: tuple[str, ...]) -> int | None:
    """The limit in an OpenAI ``token_limit_exceeded`` message ("Limit: 90,000 enqueued ...")."""
    for message in messages:
        found = _LIMIT.search(message)
        if found:
            return int(found.group(1).replace(",", ""))
    return None


def learned(storage: Storage, queue: Queue) -> dict[str, Any]:
    """What is known of the queue (one GET per sensor tick; nothing if never written)."""
    try:
        return dict(storage.read_json(queue.key))
    except StorageError:
        return {}


def limit_of(job: "Job", queue: Queue) -> int | None:
    if queue.unit == "tokens" and job.spec.max_enqueued_tokens is not None:
        return job.spec.max_enqueued_tokens
    limit = learned(job.state.storage, queue).get("limit")
    return int(limit) if limit is not None else None


def _learn(job: "Job", queue: Queue, limit: int | None, message: str, cooldown: bool) -> None:
    record = learned(job.state.storage, queue)
    if limit is not None:
        old = record.get("limit")
        record["limit"] = limit if old is None else min(int(old), limit)
    record |= {"unit": queue.unit, "learned_at": time.time(), "message": message[:500]}
    if cooldown:
        record["retry_at"] = time.time() + COOLDOWN_S
    job.state.storage.write_json(queue.key, record)


def team_weight(team: str) -> float:
    """The team's weight from ``MAPLE_TEAM_WEIGHTS`` ("catalog=2,search=1"); default 1."""
    for item in (knob(TEAM_WEIGHTS_ENV) or "").split(","):
        name, _, value = item.partition("=")
        if name.strip() == team and value.strip():
            try:
                weight = float(value)
            except ValueError as exc:
                raise ConfigError(
                    f"{TEAM_WEIGHTS_ENV}: weight of team {team!r} is {value!r}, not a number; "
                    "write it like catalog=2,search=1"
                ) from exc
            if weight <= 0:
                raise ConfigError(f"{TEAM_WEIGHTS_ENV}: weight of team {team!r} must be > 0")
            return weight
    return 1.0


def units(job: "Job", queue: Queue, shard: str, attempt: int) -> int:
    """Prompt tokens (or requests) of one shard attempt, from its kept estimate."""
    plan = kept_estimate(job.state, job.spec, job.wire.provider_name, shard, attempt)
    return plan.requests if queue.unit == "requests" else plan.input_tokens


def gone(job: "Job", queue: Queue) -> frozenset[str]:
    """Other jobs holding or waiting for room in the queue whose driver is gone
    (`maple_engine.ledger.queues` releases what they hold that reached no provider, and lets
    no waiting one go first)."""
    assert job.costs is not None
    with job.costs.transaction() as conn:
        held = holders(conn, _table(), queue.name)
    held.pop(job.spec.name, None)
    return frozenset(
        other
        for other, roots in held.items()
        if any(_driver_gone(job.state.storage, root, other) for root in roots)
    )


def _driver_gone(ours: Storage, root: str | None, job: str) -> bool:
    """Whether ``job``'s driver is gone, read from its lease in the storage root its slot
    names (another team's root shares this cost ledger; an unreadable one: not known gone)."""
    if root is None or root == ours.root:
        return driver_gone(ours, job)
    try:
        return driver_gone(Storage(root, s3=ours.s3), job)
    except (OSError, StorageError):
        return False


def _admit(
    job: "Job",
    queue: Queue,
    shard: str,
    attempt: int,
    *,
    probe: bool = True,
    dead: frozenset[str] | None = None,
) -> Decision:
    retry_at = float(learned(job.state.storage, queue).get("retry_at", 0))
    if retry_at > time.time():
        wait = retry_at - time.time()
        return Decision(False, f"{queue.name} refused a batch: trying again in {wait:.0f}s", 0)
    slot = Slot(
        job.spec.name,
        shard,
        attempt,
        queue.name,
        job.spec.team,
        team_weight(job.spec.team),
        job.spec.priority,
        units(job, queue, shard, attempt),
        job.state.storage.root,
    )
    limit = limit_of(job, queue)
    if limit is not None and slot.units > limit:
        job.state.stop(
            f"shard {shard} needs {slot.units:,} {queue.unit}, more than the {queue.name} queue "
            f"limit of {limit:,}: it can never be enqueued; rerun with a smaller "
            "--max-requests-per-batch",
            kind=StopKind.QUEUE,
        )
        return Decision(False, "the shard is larger than the queue limit", 0)
    assert job.costs is not None
    dead = gone(job, queue) if dead is None else dead
    with job.costs.transaction() as conn:
        probe_limit = limit if limit is not None or queue.probe else 2**62
        proven = int(learned(job.state.storage, queue).get("proven", 0)) if probe else 2**62
        return admit_slot(conn, _table(), slot, probe_limit, proven, dead=dead)


def _table() -> Any:
    from maple_engine.ledger.schema import queue_slots

    return queue_slots


def gate(job: "Job", work: "Work") -> tuple[dict[str, str], dict[str, Decision]]:
    """Of the shards to submit, those admitted into the queue now (shard -> ticket for the run
    key; ``LATE``: sent through the deadline's late lane, no queue room needed), and why the
    first one that is not admitted waits."""
    queue = queue_of(job)
    observe(job, work)
    if queue is not None and deadline_due(job):  # the rest goes real-time: nothing waits
        forget(job)
        return {shard: LATE for shard in work.submit}, {}
    probe = queue is not None and queue.probe and limit_of(job, queue) is None
    late = escalate_waiting(job, work.submit, in_flight(work.states), probe=probe)
    admitted = {shard: LATE for shard in late}
    if queue is None:
        return admitted | {shard: "" for shard in work.submit if shard not in admitted}, {}
    _release(job, [(shard, job.state.progress(shard).attempt) for shard in late])
    waiting = [shard for shard in work.submit if shard not in admitted]
    dead = gone(job, queue) if waiting else frozenset()
    for shard in waiting:
        attempt = job.state.progress(shard).attempt
        decision = _admit(job, queue, shard, attempt, dead=dead)
        if not decision.admitted:
            return admitted, {shard: decision}
        admitted[shard] = _ticket(decision.enqueued_at)
    if not waiting:
        forget(job)
    return admitted, {}


def _release(job: "Job", attempts: list[tuple[str, int]]) -> None:
    """The queue room these shard attempts held or waited for: they go the late lane."""
    if not attempts or job.costs is None:
        return
    with job.costs.transaction() as conn:
        for shard, attempt in attempts:
            release_slot(conn, _table(), (job.spec.name, shard, attempt))


def forget(job: "Job") -> None:
    """The job has nothing waiting for the queue now."""
    if job.costs is not None:
        with job.costs.transaction() as conn:
            forget_waiting(conn, _table(), job.spec.name)


def _ticket(moment: datetime | None) -> str:
    return f"q{moment.timestamp():.3f}" if moment is not None else ""


def admitted(job: "Job", shard: str, attempt: int, chain: "Chain | None" = None) -> bool:
    """At submit time: is the attempt admitted into the queue (admitting it if it fits)?

    The sensor admitted it already unless the run was launched without it (a backfill from
    the UI): then a known limit and the fair shares still hold, but nothing waits for
    validations (only the sensor sees them), unless the run submits its shards as a ``chain``."""
    queue = queue_of(job)
    if queue is None:
        return True
    if chain is not None:  # a late shard leaves the chain: the sensor sends it with the others
        return chain.admit(job, queue, shard, attempt)
    if is_late(job, shard, attempt):
        return True
    return _admit(job, queue, shard, attempt, probe=False).admitted


class Chain:
    """One run's shards sent one after another into a queue whose limit is not known yet.

    Each shard waits, inside the run, until the batches this run sent before it pass the
    provider's validation (polled here, as the sensor would on its next tick), so one run sends
    the shards that the sensor would admit one tick and one run at a time, with the same
    guarantee: at most one batch beyond what the queue was seen to hold awaits validation, so
    at most one fails while the limit is learned. A shard that waits for anything else (a known
    limit, other jobs' batches, fair shares), or longer than ``wait_s``, is left to the
    sensor. While it waits, the job's state says a chain holds the job's waiting shards (until
    a little past the wait, so a run that died lets go by itself) and the sensor asks no other
    run to send them; the run lets go when it ends (`release`)."""

    HOLD_SLACK_S = 30.0  # how long past a shard's wait the hold outlives a run that died

    def __init__(self, wait_s: float, shards: Sequence[str] = ()) -> None:
        self.wait_s = wait_s
        self.shards = list(shards)  # the run's shards, in the order it sends them
        self.sent: list[Submission] = []  # by this run, not yet seen past validation
        self.out: list[Submission] = []  # every batch this run sent
        self.given_up = False  # a deadline needs the run's shards sooner than the chain sends
        self._dead: frozenset[str] | None = None

    def admit(self, job: "Job", queue: Queue, shard: str, attempt: int) -> bool:
        """Whether ``shard`` goes now as a batch. With a deadline, the chain gives up (this
        shard and the run's next ones are left to the sensor, which sends them all at once
        through the late lane) when the deadline is due or one of them could not end as a
        batch in time (`maple_engine.submit.escalation`)."""
        until = time.monotonic() + self.wait_s
        job.state.hold_chain(time.time() + self.wait_s + self.HOLD_SLACK_S)
        if self._dead is None:  # jobs gone for good: looked up once per run
            self._dead = gone(job, queue)
        while not self._late(job, shard):
            decision = _admit(job, queue, shard, attempt, dead=self._dead)
            if decision.admitted:
                return True
            if not decision.validating or not self.sent:
                return False
            if not self._validated(job, queue, until, shard):
                return False
        return False

    def _late(self, job: "Job", shard: str) -> bool:
        """The deadline needs ``shard`` or a later shard of the run sooner than the chain would
        send it: the chain gives up."""
        if not self.given_up:
            rest = self.shards[self.shards.index(shard) :] if shard in self.shards else [shard]
            late = deadline_due(job) or escalate_waiting(job, rest, self.out, probe=True)
            self.given_up = bool(late)
        return self.given_up

    @staticmethod
    def release(job: "Job") -> None:
        """The run's chain has ended: the sensor may ask for the shards it left."""
        job.state.release_chain()

    def _validated(self, job: "Job", queue: Queue, until: float, shard: str) -> bool:
        """Wait until one of this run's batches passes validation (False: not by ``until``, or
        the deadline needs ``shard`` sooner)."""
        pause = 0.2  # a validation takes at least a round trip or two: no poll right away
        while True:
            time.sleep(pause)
            if self._watch(job, queue):
                return True
            if time.monotonic() > until or self._late(job, shard):
                return False
            pause = min(pause * 2, 2.0)

    def _watch(self, job: "Job", queue: Queue) -> bool:
        """Poll this run's batches awaiting validation; mark those past it (True if any)."""
        states = job.poll(self.sent)
        seen = [(sub, states[sub.batch_id]) for sub in self.sent if sub.batch_id in states]
        past = [(sub, state) for sub, state in seen if state.status not in _VALIDATING]
        if past:
            note_states(job, queue, past)
            done = {sub.batch_id for sub, _ in past}
            self.sent = [sub for sub in self.sent if sub.batch_id not in done]
        return bool(past)


def submit(job: "Job", payload: ShardPayload, chain: Chain | None = None) -> Submission | None:
    """Send the batch; a provider that refuses it as queue-full teaches the limit (None).
    ``chain``: the run's chain, whose next shard waits for this batch's validation."""
    queue = queue_of(job)
    key = (payload.job, payload.shard, payload.attempt)
    try:
        submission = job.attempt_lane(payload.shard, payload.attempt).submit(payload)
    except QueueFull as exc:
        if queue is None or job.costs is None:
            raise
        with job.costs.transaction() as conn:
            out = refused(conn, _table(), queue.name)
        _learn(job, queue, out or None, str(exc), cooldown=not out)
        return None
    except BaseException:  # failed or interrupted: hold no room, keep nobody waiting
        if queue is not None and job.costs is not None:
            with job.costs.transaction() as conn:
                release_slot(conn, _table(), key)
        raise
    if is_realtime(submission):
        return submission  # the deadline's late lane: it took no queue room
    if queue is not None and job.costs is not None:
        with job.costs.transaction() as conn:
            mark_sent(conn, _table(), key)
    if chain is not None:
        chain.sent.append(submission)
        chain.out.append(submission)
    return submission


def observe(job: "Job", work: "Work") -> None:
    """Release the queue room of ended batches (and of admitted attempts the job no longer
    submits or waits for), mark validated ones, learn from refusals."""
    queue = queue_of(job)
    if queue is None:
        return
    pending = {(s, job.state.progress(s).attempt) for s in work.submit}
    pending |= {(sub.shard, sub.attempt) for sub, _ in work.states}
    assert job.costs is not None
    with job.costs.transaction() as conn:
        release_others(conn, _table(), job.spec.name, pending)
    if not work.states:
        return
    note_states(job, queue, work.states)


def note_states(job: "Job", queue: Queue, states: list[tuple[Submission, BatchState]]) -> None:
    """Mark in the queue ledger what polls saw: batches past validation, ended ones (their
    room released), and the limit a refused batch's message teaches."""
    assert job.costs is not None
    ended: list[tuple[str, str, int]] = []
    validated: list[tuple[str, str, int]] = []
    for sub, state in states:
        key = (sub.job, sub.shard, sub.attempt)
        if state.ended:
            ended.append(key)
            if LIMIT_CODE in state.error_codes:
                known = limit_of(job, queue)
                _learn(
                    job, queue, parse_limit(state.errors), " ".join(state.errors), known is not None
                )
        elif state.status not in _VALIDATING:
            validated.append(key)
    with job.costs.transaction() as conn:
        mark(conn, _table(), validated, released=False)
        held = validated_units(conn, _table(), queue.name) if validated else 0
        mark(conn, _table(), ended, released=True)
    record = learned(job.state.storage, queue)
    unknown = record.get("limit") is None and job.spec.max_enqueued_tokens is None
    if queue.probe and unknown and held > int(record.get("proven", 0)):
        job.state.storage.write_json(queue.key, {**record, "proven": held, "unit": queue.unit})


def waiting_states(
    subs: list[Submission], states: dict[str, BatchState]
) -> list[tuple[Submission, BatchState]]:
    return [(s, states[s.batch_id]) for s in subs if s.batch_id in states]
