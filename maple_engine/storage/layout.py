"""The paths under the storage root, in one place; the few joined where they are used (the IO
manager's asset files, the ledger's default SQLite file, the CLI's Dagster instance, a local
root's checkpoint write-ahead logs) are listed in docs/architecture.md, "Storage layout".

Keys are ``/``-separated and relative to the root (`maple_engine.storage.storage.Storage` resolves
them).
Layout of one job ``<job>``::

    <job>/state/
        spec.json                       the current version's spec and fingerprint
        version.json                    the current version (`maple_engine.plan.versions`)
        manifest.json                   the current version's shards, written once every shard
                                        file and attempt-1 plan exists; rows sent and reused
        merged.json                     the last merge: output path, version, totals
        stop.json                       why the job stopped submitting, and its kind (quota,
                                        cancel, budget, age); a rerun of `maple enrich` lifts
                                        quota/cancel
        budget_stop.json                the budget that stopped the job
        interrupted.json                a Ctrl-C stopped the driver (`maple status`)
        canary.json                     the last canary: its shares, top failure, fingerprint
        canary/rt-<n>/                  the real-time checkpoints of the canary's n-th send
        driver/                         the driver lease (one `maple enrich` per job)
        sharding/                       the sharding lease (one `input_shards` run at a time)
        queue_wait.json                 why the job's next shard waits for queue room
        chain.json                      a chained submissions run is sending the shards that
                                        wait for validation, until when (`submit.queue.Chain`)
        shards/<key>.parquet            input columns + row id + encoded request
        <key>/plan-<n>.parquet          custom ids sent in attempt n
        <key>/submission-<n>.json       the provider batch of attempt n (right after create)
        <key>/estimate-<n>.json         attempt n's estimated requests and tokens (budget, queue)
        <key>/deadline-cancel-<n>.json  attempt n's batch was cancelled for the deadline
        <key>/stall-cancel-<n>.json     attempt n's batch was stalled (or expected to end past
                                        the deadline): cancelled, rest real-time
        <key>/deadline-late-<n>.json    attempt n could not reach the provider's batch queue in
                                        time for the deadline: it goes real-time at once
        <key>/claim-<n>/                the claim on attempt n (`maple_engine.storage.leases`)
        <key>/rt-<n>/                   real-time checkpoints of attempt n
        <key>/results-<n>.parquet       the rows not final after attempt n (to retry, or held by
                                        a stop): latest outcome, sends and cost so far; final
                                        outcomes are in the response store
        <key>/summary.json              after each collection: attempt, retries pending, final,
                                        max requests per attempt after a too-large rejection
        anthropic-intents/<key>-<n>.json  an Anthropic batch about to be created
        openrouter-intents/<key>-<n>.json  an OpenRouter batch about to be created
        versions/<n>/keys/<b>.parquet   row id and request key of every row, by key bucket
        versions/<n>/digests.parquet    a digest per row of its template's columns, in row order
        versions/<n>/copy.json          the last merged output its unchanged rows' answers are
                                        copied from; copied.bin: which rows (a bit each)
        versions/<n>/fill/<b>.parquet   row id and key of the rows not sent (filled at merge)
        versions/<n>/fills/<b>.parquet  those rows joined with their stored records, by row id
    <job>/store/<shard>-a<n>.parquet   the response store (`maple_engine.storage.response_store`):
                                        the outcomes attempt n made final, a row group per key
                                        bucket; store/<b>/<shard>-a<n>.parquet: its records in
                                        a file per key bucket <b>, as earlier Maples wrote them
                                        (read; removed when the collection is written again)
    <job>/output/merged.<fmt>           the merged output when no --output is given
    <job>/bedrock/input/<stem>-<digest>.jsonl, <job>/bedrock/output/<stem>/
                                        Bedrock batch inference's input and output objects
    _ratelimits/<provider>/<account>/<model>/<sender>~<expiry>.json
                                        real-time senders' heartbeats (their share of a limit)
    _queues/<provider>/<model>.json     a provider queue's limit, configured, learned or probed
    _webhooks/<provider>/events/<batch id>.json, ids/<sha256>
                                        pushed batch events not yet polled, and the delivery
                                        ids recorded (`maple_engine.storage.batch_events`)
    _reports/batch_stats/<day>.html, .csv  the maple_batch_stats asset's report and batches
    costs.sqlite                        the default cost ledger of a local root
"""

import dataclasses

COSTS_DB = "costs.sqlite"


def join(*parts: str) -> str:
    """``parts`` as one key or path (the single place keys are joined); empty parts are skipped
    and a leading ``/`` (an absolute local root) is kept."""
    head, *rest = [p for p in parts if p] or [""]
    return "/".join([head.rstrip("/"), *(p.strip("/") for p in rest)])


def last_part(key: str) -> str:
    """The last part of a key or URI (a file or folder name)."""
    return key.rstrip("/").rsplit("/", 1)[-1]


@dataclasses.dataclass(frozen=True)
class JobLayout:
    """The keys of one job's files under the storage root."""

    job: str

    def state(self, *parts: str) -> str:
        return join(self.job, "state", *parts)

    # -- job-level files ------------------------------------------------------------------
    @property
    def spec(self) -> str:
        return self.state("spec.json")

    @property
    def version(self) -> str:
        return self.state("version.json")

    @property
    def manifest(self) -> str:
        return self.state("manifest.json")

    @property
    def merged(self) -> str:
        return self.state("merged.json")

    @property
    def stop(self) -> str:
        return self.state("stop.json")

    @property
    def budget_stop(self) -> str:
        return self.state("budget_stop.json")

    @property
    def interrupted(self) -> str:
        return self.state("interrupted.json")

    @property
    def canary(self) -> str:
        """The last canary's report (`maple_engine.canary`)."""
        return self.state("canary.json")

    @property
    def driver(self) -> str:
        return self.state("driver")

    def output(self, fmt: str) -> str:
        return join(self.job, "output", f"merged.{fmt}")

    # -- per shard ------------------------------------------------------------------------
    def shard_file(self, shard: str) -> str:
        return self.state("shards", f"{shard}.parquet")

    def shard_dir(self, shard: str) -> str:
        return self.state(shard)

    def plan(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"plan-{attempt}.parquet")

    def submission(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"submission-{attempt}.json")

    @staticmethod
    def is_submission(key: str) -> bool:
        return last_part(key).startswith("submission-")

    def estimate(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"estimate-{attempt}.json")

    def claim(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"claim-{attempt}")

    def checkpoints(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"rt-{attempt}")

    def results(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"results-{attempt}.parquet")

    def summary(self, shard: str) -> str:
        return self.state(shard, "summary.json")

    def deadline_cancel(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"deadline-cancel-{attempt}.json")

    def stall_cancel(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"stall-cancel-{attempt}.json")

    def deadline_late(self, shard: str, attempt: int) -> str:
        return self.state(shard, f"deadline-late-{attempt}.json")

    @property
    def sharding(self) -> str:
        """The lease one ``input_shards`` run holds while it cuts the job's shards."""
        return self.state("sharding")

    @property
    def queue_wait(self) -> str:
        return self.state("queue_wait.json")

    @property
    def chain(self) -> str:
        return self.state("chain.json")

    # -- provider-side records (``folder`` is the provider's own) ---------------------------
    def provider_state(self, folder: str, *parts: str) -> str:
        """A provider's records among the job's state (Anthropic's and OpenRouter's create
        intents)."""
        return self.state(folder, *parts)

    def provider_files(self, folder: str, *parts: str) -> str:
        """Objects a provider reads or writes itself (Bedrock's input and output)."""
        return join(self.job, folder, *parts)

    # -- versions and the response store --------------------------------------------------
    def version_dir(self, number: int) -> str:
        return self.state("versions", str(number))

    def version_keys_dir(self, number: int) -> str:
        return join(self.version_dir(number), "keys")

    def version_keys(self, number: int, bucket: str) -> str:
        return join(self.version_keys_dir(number), f"{bucket}.parquet")

    def version_digests(self, number: int) -> str:
        return join(self.version_dir(number), "digests.parquet")

    def version_copy(self, number: int) -> str:
        return join(self.version_dir(number), "copy.json")

    def version_copied(self, number: int) -> str:
        return join(self.version_dir(number), "copied.bin")

    def version_fill(self, number: int, bucket: str) -> str:
        return join(self.version_dir(number), "fill", f"{bucket}.parquet")

    def version_fills_dir(self, number: int) -> str:
        return join(self.version_dir(number), "fills")

    def version_fills(self, number: int, bucket: str) -> str:
        return join(self.version_fills_dir(number), f"{bucket}.parquet")

    def store_dir(self) -> str:
        return join(self.job, "store")

    def store_file(self, name: str) -> str:
        return join(self.store_dir(), f"{name}.parquet")

    def store_bucket(self, bucket: str) -> str:
        """A key bucket's folder of the store's per-bucket files (`response_store`)."""
        return join(self.store_dir(), bucket)

    def store_bucket_file(self, bucket: str, name: str) -> str:
        return join(self.store_bucket(bucket), f"{name}.parquet")


QUEUES = "_queues"


def queue_file(provider: str, model: str) -> str:
    """What is known of one provider queue (its limit, learned or probed), for every job."""
    return join(QUEUES, provider, f"{model}.json")


def batch_stats_report(day: str, suffix: str) -> str:
    """The ``maple_batch_stats`` asset's files for one UTC day (``html`` report, ``csv``)."""
    return join("_reports", "batch_stats", f"{day}.{suffix}")


def rate_share_folder(provider: str, account: str, model: str) -> str:
    """Where the real-time senders of one provider account and model keep their heartbeats."""
    return join("_ratelimits", provider, account, model)


def run_worker_folder(run_id: str) -> str:
    """The lease a Dagster run's worker beats while it runs (run monitoring reads it)."""
    return join("_runs", run_id, "worker")


DISTILL = "_distill"


@dataclasses.dataclass(frozen=True)
class DistillPaths:
    """The files of one distilled job ``NAME`` (``--distill``) under the storage root:
    ``_distill/NAME/llm_input.parquet`` (the rows the LLM job ``NAME`` answers: the input's
    columns and ``distill_key``), ``llm_output.parquet`` (its output), ``embeddings.parquet``
    (the embedding job ``NAME-embeddings``' output), ``classifiers/VERSION.json``,
    ``report.json`` (the last run's figures) and ``output.<fmt>`` (the asset graph's output
    when the job names none)."""

    job: str

    @property
    def folder(self) -> str:
        return join(DISTILL, self.job)

    @property
    def embeddings(self) -> str:
        return f"{self.folder}/embeddings.parquet"

    @property
    def llm_input(self) -> str:
        return f"{self.folder}/llm_input.parquet"

    @property
    def llm_output(self) -> str:
        return f"{self.folder}/llm_output.parquet"

    @property
    def report(self) -> str:
        return f"{self.folder}/report.json"

    def output(self, fmt: str) -> str:
        """The output of the asset graph's ``distilled`` when the job names none."""
        return f"{self.folder}/output.{fmt}"

    def classifier(self, version: str) -> str:
        return f"{self.folder}/classifiers/{version}.json"


def job_names(listed: list[str]) -> list[str]:
    """The job folders among the root's listed keys."""
    return [n for n in (last_part(k) for k in listed) if n]
