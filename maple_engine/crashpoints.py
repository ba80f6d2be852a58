"""Test hook: die (or raise) at a named point so crash tests hit exact moments.

Every layer may call it (providers, submission, collection): it sits at the engine's root.

``MAPLE_CRASH_AT=after_create`` makes the process SIGKILL itself when it reaches
``crash_point("after_create")``; ``MAPLE_CRASH_MODE=raise`` raises ``CrashPointReached`` instead
(a failed Dagster run rather than a dead process); ``MAPLE_CRASH_MODE=stop`` freezes the process
there (SIGSTOP), for a test to kill its whole host at that moment. Unset, a crash point costs one
dict lookup.

Points, in the order a job meets them:

    file_uploaded     sharding, --file-column: a file sent by id is uploaded, its id not
                      yet recorded under the storage root
    shard_written     sharding: a shard file is written, the manifest is not
    after_upload      submit: the JSONL file is uploaded, no batch created yet
    after_create      submit: the batch exists at the provider, not yet recorded
    mid_download      collect: the output file is downloaded, the error file not yet
    after_results     collect: the attempt's answers written (final ones to the response
                      store, pending ones to results-n), cost and retry plan not yet
    before_summary    collect: retry plan written, summary not yet
    mid_merge         merge: the first shard is written to the partial output file
    distill_embedded  --distill: every row embedded, no sample sent yet
    distill_trained   --distill: the classifier stored, the unsure rows not sent yet
    distill_unsure    --distill: the LLM job's input holds the unsure rows, none sent yet
"""

import os
import signal

from maple_engine.settings import knob

ENV = "MAPLE_CRASH_AT"
MODE_ENV = "MAPLE_CRASH_MODE"
POINTS = (
    "shard_written",
    "after_upload",
    "after_create",
    "mid_download",
    "after_results",
    "before_summary",
    "mid_merge",
)
DISTILL_POINTS = ("distill_embedded", "distill_trained", "distill_unsure")  # --distill jobs only
FILE_POINTS = ("file_uploaded",)  # jobs sending files by id only


class CrashPointReached(RuntimeError):
    """Raised at a crash point when ``MAPLE_CRASH_MODE=raise`` (tests only)."""


def crash_point(name: str) -> None:
    """SIGKILL this process (or raise, or stop it) when ``MAPLE_CRASH_AT`` names this point."""
    if knob(ENV) != name:
        return
    mode = knob(MODE_ENV)
    if mode == "raise":
        raise CrashPointReached(f"crash point {name!r} reached ({ENV}={name})")
    os.kill(os.getpid(), signal.SIGSTOP if mode == "stop" else signal.SIGKILL)
