"""Which shards the sensor sends now: the provider queue's budget and the job's deadline.

Called once per sensor tick (the daemon's, or the CLI driver's) with the job's pending work. It
releases the queue room of batches that ended, cancels running batches when the deadline is
due, and admits shards into the shared queue; the shards not admitted wait, and why is written
to ``<job>/state/queue_wait.json`` for ``maple status`` and the sensor's tick message.
"""

import time
from typing import TYPE_CHECKING, Any

from maple_engine.submit import queue
from maple_engine.submit.deadline import cancel_for_deadline
from maple_engine.submit.stalls import escalate_stalled

if TYPE_CHECKING:
    from maple_engine.job import Job
    from maple_engine.work import Work

MAX_LISTED = 1000  # shards named in the wait note


def plan_submissions(job: "Job", work: "Work") -> dict[str, str]:
    """Shard -> ticket (part of the submit run key) for every shard to submit now."""
    stalls = []
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
    admitted, waits = queue.gate(job, work)
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
    elif not queue.deadline_due(job) and not stalls:
        job.state.clear_queue_wait()
    return admitted


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
