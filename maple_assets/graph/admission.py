"""Which shards the sensor sends now: the provider queue's budget and the job's deadline.

Called once per sensor tick (the daemon's, or the CLI driver's) with the job's pending work. It
releases the queue room of batches that ended, cancels running batches when the deadline is
due, and admits shards into the shared queue; the shards not admitted wait, and why is written
to ``<job>/state/queue_wait.json`` for ``maple status`` and the sensor's tick message.

While a provider queue's limit is being learned, each batch must pass validation before the
next goes: the shards that wait only for that go in the run of the last admitted shard, as a
chain (`maple_engine.submit.queue.Chain`), not one tick and one run each; while that run holds
them, no other run is asked to send any.
"""

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from maple_engine.submit import queue
from maple_engine.submit.deadline import cancel_for_deadline
from maple_engine.submit.escalation import cancel_unreachable, in_flight
from maple_engine.submit.stalls import escalate_stalled

if TYPE_CHECKING:
    from maple_engine.job import Job
    from maple_engine.work import Work

MAX_LISTED = 1000  # shards named in the wait note
CHAIN_WAIT_S = 30.0  # how long a chained shard waits for the batch before it to be validated
#: Shards one chained run sends: then the sensor (or the CLI's driver) collects what ended (an
#: in-process Dagster run cannot run beside another: both configure the process's logging).
CHAIN_SHARDS = 16


@dataclasses.dataclass(frozen=True)
class Admitted:
    """What a tick sends: shard -> ticket (part of the submit run key) for every shard
    admitted now, and the shards that wait only for validation, in the job's order (a chain
    may take them after the last admitted one)."""

    tickets: dict[str, str]
    validating: list[str]


def plan_submissions(job: "Job", work: "Work") -> Admitted:
    """The shards to submit now, and those a chain may send after them."""
    stalls: list[Any] = []
    overdue: list[Any] = []
    if queue.deadline_due(job):
        cancelled = cancel_for_deadline(job, work.states)
        if cancelled:
            _note(
                job,
                {
                    "deadline": f"deadline near: cancelled {len(cancelled)} batch(es); "
                    "their unrun rows and every unsent shard go through real-time"
                },
            )
    elif stalls := escalate_stalled(job, work.states):  # noted until the next tick
        _note(
            job,
            {
                "deadline": f"stalled: cancelled {len(stalls)} batch(es) ({stalls[0].describe()}); "
                "their unrun rows go through real-time"
            },
        )
    elif overdue := cancel_unreachable(job, in_flight(work.states)):
        _note(
            job,
            {
                "deadline": f"cancelled {len(overdue)} batch(es) expected to end past the "
                "deadline; their unrun rows go through real-time"
            },
        )
    if not queue.deadline_due(job) and job.state.chain_held(time.time()):
        return Admitted({}, [])  # a chained run is sending the waiting shards in order
    admitted, waits = queue.gate(job, work)
    late = [s for s, ticket in admitted.items() if ticket == queue.LATE]
    if late and not queue.deadline_due(job):
        _note(
            job,
            {
                "deadline": f"{len(late)} shard(s) could not end as batches before the "
                "deadline: sent through real-time now"
            },
        )
    if waits:
        shard, decision = next(iter(waits.items()))
        waiting = len(work.submit) - len(admitted)
        note: dict[str, Any] = {
            "shard": shard,
            "waiting_shards": waiting,
            "reason": decision.reason,
        }
        if decision.validating:  # what a run may send as a chain (`queue.Chain`), in order
            note["validating"] = [s for s in work.submit if s not in admitted][:MAX_LISTED]
        _note(job, note)
        return Admitted(admitted, note.get("validating", []))
    if not queue.deadline_due(job) and not stalls and not overdue and not late:
        job.state.clear_queue_wait()
    return Admitted(admitted, [])


def chain_after(admitted: list[str], validating: list[str], order: list[str]) -> list[str]:
    """The shards one run sends after the last ``admitted`` one, as a chain: those that wait
    only for validation and follow it in the partitions' ``order`` without a gap (a run's
    partition range), at most ``CHAIN_SHARDS`` shards in the run."""
    position = {key: i for i, key in enumerate(order)}
    if not admitted or not validating or admitted[-1] not in position:
        return []
    waiting = set(validating)
    chained: list[str] = []
    for key in order[position[admitted[-1]] + 1 :]:
        if key not in waiting or len(chained) + 1 >= CHAIN_SHARDS:
            break
        chained.append(key)
    return chained


def _note(job: "Job", record: dict[str, Any]) -> None:
    job.state.write_queue_wait({**record, "at": time.time()})


def wait_note(job: "Job") -> dict[str, Any] | None:
    """Why the job's next shard waits (or what the deadline did), if anything."""
    return job.state.queue_wait_record()


def wait_message(note: dict[str, Any] | None) -> str:
    if not note:
        return ""
    if "deadline" in note:
        return str(note["deadline"])
    return f"{note['waiting_shards']} shard(s) wait for the provider queue: {note['reason']}"
