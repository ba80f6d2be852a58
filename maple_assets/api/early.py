"""A real-time job's first shards, sent while Dagster loads.

Importing Dagster, opening its instance and running ``input_shards`` take seconds, and a
real-time job's rate limit idles meanwhile. So ``maple enrich``, once it holds the job's driver
lease, runs the job's first steps here, on a thread and without Dagster: it cuts the shards
(``maple_engine.plan.rerun.shard_input``) and submits them one after another
(``maple_engine.steps.submit_shard``: the same claims, checkpoints and sender as a Dagster
run's). When the Dagster side is ready it asks for the handover: the shard being sent is
finished, nothing more starts here, and the Dagster runs take the job from there. The driver
imports Dagster only once the provider has begun to answer the first request
(``wait_first_request``): the import would otherwise take the interpreter from the steps before
the request is even on the wire (under load, the request reached the provider after Dagster
began to load). The Dagster runs adopt
what was sent: ``input_shards`` resumes the version cut here, a ``submissions`` run of the
shards sent here finds their attempts recorded (and materializes them as usual), and
``raw_responses`` collects them from their checkpoints. A crash here (even SIGKILL) leaves what
a crash in a Dagster run leaves: the rerun resumes each attempt from its checkpoints.

Only a plain real-time job starts early: one with a canary or a budget goes through Dagster
from its first step (the canary's and the budget's checks and messages are the runs').
"""

import threading

from maple_engine.canary import run_canary
from maple_engine.errors import BreakerOpen, ReplyMismatch, SetupRefused
from maple_engine.job import Job
from maple_engine.plan.rerun import shard_input
from maple_engine.providers.registry import capabilities
from maple_engine.spec import JobSpec
from maple_engine.steps import submit_shard
from maple_engine.submit.sizing import size_shards


def starts_early(spec: JobSpec) -> bool:
    """Whether ``spec``'s first shards are sent before Dagster loads."""
    plain = spec.canary is None and spec.budget_usd is None and spec.source is not None
    return plain and capabilities(spec.provider).mode == "realtime"


class EarlyStart:
    """The job's first steps on a thread, until ``handover()``."""

    def __init__(self, job: Job, retry_failed: bool, first_request: threading.Event) -> None:
        """``first_request``: the event ``job`` was bound to set when its first request
        leaves (`maple_assets.binding.bind_job`'s ``sending``)."""
        self.job = job
        self.retry_failed = retry_failed
        self.sent: list[str] = []  # shards whose attempt was submitted here, in order
        self.error: Exception | None = None
        self.first_request = first_request
        self._handover = threading.Event()
        # A daemon: a Ctrl-C while it sends ends the process as a crash would (resumable).
        self._thread = threading.Thread(target=self._run, name="maple-early-start", daemon=True)

    def start(self) -> "EarlyStart":
        self._thread.start()
        return self

    def wait_first_request(self) -> None:
        """Return once the provider answers the first request, or nothing more is sent here."""
        while not self.first_request.wait(0.02) and self._thread.is_alive():
            pass

    def handover(self) -> list[str]:
        """Stop after the shard being sent; the shards submitted here, for the runs to adopt.
        A job error found here (the provider refused the job's setup, the breaker opened, a
        reply could not fit the job) is raised: the runs would only send the same requests again
        to find it again."""
        self._handover.set()
        self._thread.join()
        if isinstance(self.error, (SetupRefused, BreakerOpen, ReplyMismatch)):
            raise self.error
        return self.sent

    def _run(self) -> None:
        # The boundary of this thread: whatever fails here is left to the Dagster runs, which
        # take the same step again and report its failure as they report any other.
        try:
            self._send()
        except Exception as exc:  # noqa: BLE001 - the boundary above: the runs report it
            self.error = exc

    def _send(self) -> None:
        job = self.job
        shards, _, _ = shard_input(
            job,
            job.spec.source,
            retry_failed=self.retry_failed,
            before_planning=run_canary,
            sizer=size_shards,
        )
        for shard in shards:
            if self._handover.is_set():
                return
            if job.state.progress(shard.key).action != "submit":
                continue  # sent by an earlier run, or done
            if submit_shard(job, shard.key) is None:
                return  # the job stopped: the runs say why
            self.sent.append(shard.key)
