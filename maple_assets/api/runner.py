"""A job's driver (``maple enrich``, ``maple_assets.enrich``, ``maple_job``): the enrichment's
asset graph, in-process, against a persistent Dagster instance, ticking the enrichment's own
sensor until every shard is final (no daemon)."""

import dataclasses
import resource
import time
from collections.abc import Callable
from typing import Any

import dagster as dg

from maple_assets.api import dagster_home
from maple_assets.api.distilled_graph import run_distilled_graph
from maple_assets.api.interrupts import interrupts_seen
from maple_assets.api.progress import Counts, Progress
from maple_assets.binding import COSTS_KEY, job_for
from maple_assets.factory import Enrichment
from maple_assets.graph.failed_shards import DRIVER_TAG
from maple_assets.graph.sensor_cursor import only_polled_at
from maple_assets.graph.tags import run_tags
from maple_engine.job import Job
from maple_engine.ledger.costs import CostLedger
from maple_engine.memory import give_back
from maple_engine.merge.merge import OutputTable
from maple_engine.plan.turnaround import TurnaroundFit
from maple_engine.state import JobState
from maple_engine.submit.eta import fit_for, job_eta
from maple_engine.work import merged_for, only_left, pushed_events, waiting_batches
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END,
)
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START,
)
from resources.dagster_private import (
    EPHEMERAL_JOB_NAME as STAGE_JOB,  # the job name ``dg.materialize`` gives its runs
)


def instance_for(storage_root: str) -> dg.DagsterInstance:
    """``DAGSTER_HOME`` if set, else a persistent instance under the (local) storage root."""
    return dagster_home.instance_for(storage_root)


#: How often a driver waiting for its poll interval looks for pushed batch events (one listing
#: of the provider's events folder under the storage root; no provider call).
EVENT_CHECK_S = 1.0


class Runner:
    def __init__(
        self,
        enrichment: Enrichment,
        resources: dict[str, Any],
        instance: dg.DagsterInstance,
        *,
        poll_interval_s: float = 1.0,
        quiet: bool = False,
        log_level: str = "WARNING",
        shard_config: dict[str, Any] | None = None,
        driver: str = "cli",
    ) -> None:
        self.driver = driver
        self.shard_config = shard_config or {}
        self.log_level = log_level
        self.enrichment = enrichment
        self.resources = resources
        self._costs: CostLedger | None = None
        self.instance = instance
        self.poll_interval_s = poll_interval_s
        self.progress = Progress(quiet=quiet)
        self._fit: TurnaroundFit | None = None
        self._fitted_at: int | None = None  # the finished shards when the fit was read
        self._interrupted: Callable[[], bool] = lambda: False
        # The sensor's cursor as this driver keeps it: when the last tick polled every batch
        # (its other keys are the daemon's; this driver dedupes its runs itself). It is handed
        # to the next tick only when a pushed event woke the driver before its own poll
        # interval passed (that tick polls the announced batches alone); otherwise every tick
        # polls every batch, at this driver's interval, not the sensor's.
        self._polled: str | None = None
        self._woken_early = False
        self.executed: set[str] = set()
        self.timings: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # process CPU (every thread) per stage
        self.runs = 0
        self.peak_rss_mib: dict[str, int] = {}  # process high-water mark after each stage
        self.ticks = 0
        self.stage_runs: dict[str, int] = {}
        self._jobs: dict[tuple[dg.AssetKey, ...], dg.JobDefinition] = {}
        self._ended: dict[str, tuple[float, float]] = {}  # step -> (wall, CPU) as it ended
        self.pdef_name = enrichment.partitions_def.name or ""
        self.quiet = quiet
        self.definitions = dg.Definitions(
            assets=enrichment.assets,
            asset_checks=enrichment.checks,
            sensors=enrichment.sensors,
            resources=resources,
        )

    def figures(self) -> dict[str, Any]:
        """Per-stage wall and CPU times, runs, sensor ticks and memory high-water marks."""
        return {
            "stages": self.timings,
            "stages_cpu": self.cpu,
            "cpu_total": time.process_time(),
            "runs": self.runs,
            "stage_runs": self.stage_runs,
            "ticks": self.ticks,
            "peak_rss_mib": self.peak_rss_mib,
        }

    def of(self, enrichment: Enrichment) -> "Runner":
        """A runner of ``enrichment`` (one of a distilled job's jobs) like this one."""
        return Runner(
            enrichment, self.resources, self.instance, poll_interval_s=self.poll_interval_s,
            quiet=self.quiet, log_level=self.log_level, shard_config=self.shard_config,
            driver=self.driver,
        )  # fmt: skip

    def job(self) -> Job:
        return job_for(self.enrichment.spec, self.enrichment.policy, _Namespace(self.resources))

    def materialize(
        self,
        key: dg.AssetKey,
        first: str | None = None,
        last: str | None = None,
        config: dict[str, Any] | None = None,
        then: dg.AssetKey | None = None,
    ) -> None:
        """One in-process run of ``key``: unpartitioned, one shard, or the shards first..last;
        ``then``: an unpartitioned asset the same run materializes after them (a range run
        then, even of one shard: ``merged`` skips itself in one if retries are planned)."""
        tags = {DRIVER_TAG: self.driver, **run_tags(self.enrichment.spec, self.job().state)}
        if first is not None and last is not None and (first != last or then is not None):
            tags |= {RANGE_START: first, RANGE_END: last}
            first = None
        keys = (key, then) if then is not None else (key,)
        started, cpu = time.monotonic(), time.process_time()
        result = self._stage_job(keys).execute_in_process(
            partition_key=first,
            instance=self.instance,
            tags=tags,
            run_config={
                "loggers": {"console": {"config": {"log_level": self.log_level}}},
                **({"ops": {"__".join(key.path): {"config": config}}} if config else {}),
            },
        )
        if self._interrupted():  # a Ctrl-C Dagster's own handler took during the run
            raise KeyboardInterrupt
        give_back()  # the next stage's peak does not stand on what this one freed
        # a run of two stages: the first's share ends as its step did
        ended = self._ended.pop("__".join(key.path), None) if then is not None else None
        self.runs += 1
        for stage, since, until in (
            (key.path[-1], (started, cpu), ended),
            *([(then.path[-1], ended, None)] if then is not None and ended else []),
        ):
            self._spent(stage, *since, until)
            self.peak_rss_mib[stage] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            self.stage_runs[stage] = self.stage_runs.get(stage, 0) + 1
        if not result.success:
            raise RuntimeError(f"run of {key.to_user_string()} [{first}..{last}] failed")

    def _stage_job(self, keys: tuple[dg.AssetKey, ...]) -> dg.JobDefinition:
        """The job that materializes one stage (or a stage and ``merged``): what
        ``dg.materialize`` builds for each run, built once (a run of a resolved job skips
        re-resolving every job of the definitions and reuses the job's snapshot)."""
        job = self._jobs.get(keys)
        if job is None:
            selection = dg.AssetSelection.assets(*keys)
            hooks = {self._step_end} if len(keys) > 1 else set()
            defs = dg.Definitions(
                # a run of two stages notes where the first ended (a hook event per step)
                jobs=[dg.define_asset_job(STAGE_JOB, selection=selection, hooks=hooks)],
                assets=[*self.enrichment.assets, *self.enrichment.checks],
                resources=self.resources,
            )
            job = self._jobs[keys] = defs.resolve_job_def(STAGE_JOB)
        return job

    @property
    def _step_end(self) -> dg.HookDefinition:
        """Notes when each step of a run ended (wall and process CPU), to split a run of two
        stages between them."""

        @dg.success_hook(name="maple_step_end")
        def step_end(context: dg.HookContext) -> None:
            self._ended[context.step_key] = (time.monotonic(), time.process_time())

        return step_end

    def run_ranges(
        self,
        key: dg.AssetKey,
        shards: list[str],
        config: dict[str, Any] | None = None,
        then: dg.AssetKey | None = None,
    ) -> None:
        """Materialize ``shards`` as few runs as possible: one per contiguous range (``then``:
        materialized by the last of them too, after its shards)."""
        order = {k: i for i, k in enumerate(self.instance.get_dynamic_partitions(self.pdef_name))}
        ranked = sorted(shards, key=order.__getitem__)
        start = 0
        for i in range(1, len(ranked) + 1):
            if i == len(ranked) or order[ranked[i]] != order[ranked[i - 1]] + 1:
                after = then if i == len(ranked) else None
                self.materialize(key, ranked[start], ranked[i - 1], config, after)
                start = i

    def shards(self, request: dg.RunRequest) -> list[str]:
        """The shard a request names, or each of its partition range's."""
        if RANGE_START not in request.tags:
            return [str(request.partition_key)]
        order = self.instance.get_dynamic_partitions(self.pdef_name)
        start, end = (order.index(request.tags[t]) for t in (RANGE_START, RANGE_END))
        return list(order[start : end + 1])

    def submit(self, key: dg.AssetKey, requests: list[dg.RunRequest]) -> None:
        """Submit what the sensor admitted: single shards as few runs as possible, and a
        chained run (while the provider queue's limit is being learned, the shards that wait
        only for validation, sent one after another: `maple_engine.submit.queue.Chain`) as
        the sensor asked for it, its range and its run config."""
        singles = [str(r.partition_key) for r in requests if RANGE_START not in r.tags]
        if singles:
            self.run_ranges(key, singles)
        for chained in (r for r in requests if RANGE_START in r.tags):
            config = chained.run_config["ops"]["__".join(key.path)]["config"]
            self.materialize(key, chained.tags[RANGE_START], chained.tags[RANGE_END], config)

    def _spent(
        self, stage: str, started: float, cpu: float, until: tuple[float, float] | None = None
    ) -> None:
        """Add the wall and CPU time from (``started``, ``cpu``) to ``until`` (now) to ``stage``."""
        wall_end, cpu_end = until or (time.monotonic(), time.process_time())
        self.timings[stage] = self.timings.get(stage, 0.0) + wall_end - started
        self.cpu[stage] = self.cpu.get(stage, 0.0) + cpu_end - cpu

    def tick(self) -> list[dg.RunRequest]:
        started, cpu = time.monotonic(), time.process_time()
        try:
            return self._tick()
        finally:
            self._spent("sensor_ticks", started, cpu)
            self.ticks += 1

    def _tick(self) -> list[dg.RunRequest]:
        with (
            dg.partition_loading_context(dynamic_partitions_store=self.instance),
            dg.build_sensor_context(
                instance=self.instance,
                resources=self.resources,
                definitions=self.definitions,
                cursor=self._polled if self._woken_early else None,
            ) as context,
        ):
            result = self.enrichment.sensor.evaluate_tick(context)
        self._polled, self._woken_early = only_polled_at(result.cursor), False
        return [r for r in result.run_requests or [] if r.run_key not in self.executed]

    def run(self, adopt: list[str] | None = None) -> OutputTable:
        """Tick the sensor and execute what it asks for, batching shards into range runs.
        ``adopt``: shards whose attempt was submitted before Dagster loaded (their
        ``submissions`` run records what was sent; ``maple_assets.api.early``). A distilled
        job runs its jobs and its own assets in turn (``maple_assets.api.distilled_graph``)."""
        if self.enrichment.distill is not None:
            return run_distilled_graph(self)
        try:
            with interrupts_seen() as self._interrupted:
                return self._run(adopt or [])
        finally:
            self.progress.close()
            if self._costs is not None:
                self._costs.close()

    def _run(self, adopt: list[str]) -> OutputTable:
        self.job().state.release_chain()  # a chain of an earlier driver, gone: this one's lease
        self.materialize(self.enrichment.key("input_shards"), config=self.shard_config)
        if adopt:
            self.run_ranges(self.enrichment.key("submissions"), adopt)
        merged_key = self.enrichment.merged_key
        collect_key = self.enrichment.key("raw_responses")
        submissions_key = self.enrichment.key("submissions")
        collections = _Deferred()
        while True:
            if self._interrupted():  # a Ctrl-C raised in a callback of a tick, and dropped
                raise KeyboardInterrupt
            requests = self.tick()
            by_asset: dict[dg.AssetKey, list[dg.RunRequest]] = {}
            for request in requests:
                key = request.asset_selection[0] if request.asset_selection else merged_key
                by_asset.setdefault(key, []).append(request)
                self.executed.add(str(request.run_key))
            collections.add([s for r in by_asset.pop(collect_key, []) for s in self.shards(r)])
            for key, asked in by_asset.items():
                if key == submissions_key:
                    self.submit(key, asked)
                elif key != merged_key:
                    self.run_ranges(key, [str(r.partition_key) for r in asked])
            if collections.due(submitting=bool(by_asset)):
                shards = collections.take()
                # the job's last batches: their collect run merges after them (one run less)
                last = only_left(self.job(), shards)
                self.run_ranges(collect_key, shards, then=merged_key if last else None)
                if last and merged_for(self.job()):
                    self._update()
                    return self._output()
            if merged_key in by_asset:
                self.materialize(merged_key)
                self._update()
                return self._output()
            self._update()
            if not requests:
                started, cpu = time.monotonic(), time.process_time()
                self._wait()
                self._spent("waiting", started, cpu)

    def _wait(self) -> None:
        """Sleep the poll interval, or until an event pushed for a batch the job waits for is
        recorded (`maple webhooks`): the next tick then polls and collects it at once."""
        job = self.job()
        events = pushed_events(job)
        batches = set(waiting_batches(job)) if events is not None else set()
        end = time.monotonic() + self.poll_interval_s
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(EVENT_CHECK_S, left) if batches else left)
            if events is not None and batches and events.among(batches):
                self._woken_early = True
                return

    def _update(self) -> None:
        job = self.job()
        counts = job_counts(job.state)
        if self._fitted_at != counts.finished:  # the history grows as batches end: refit
            self._fit = fit_for(job.state, self._ledger())
            self._fitted_at = counts.finished
        eta = job_eta(job.state, self._fit)
        self.progress.counts = dataclasses.replace(counts, eta_p50=eta.p50_at, eta_p90=eta.p90_at)
        self.progress.show()

    def _ledger(self) -> CostLedger | None:
        """The cost ledger the runs use, opened here (outside a run its resource's config is
        not resolved: ``MAPLE_COST_DB`` stays a ``dg.EnvVar``); kept for the job's life."""
        if self._costs is None:
            tracker = self.resources.get(COSTS_KEY)
            if tracker is None:
                return None
            url = tracker.database_url
            url = url.get_value() if isinstance(url, dg.EnvVar) else url
            self._costs = CostLedger(database_url=url, storage_root=tracker.storage_root)
        return self._costs

    def _output(self) -> OutputTable:
        data = self.job().state.merged_record()
        assert data is not None, "the job has merged"
        fmt = self.enrichment.spec.output_format()
        return OutputTable(path=data["path"], format=fmt, rows=int(data["rows"]))


class _Deferred:
    """Ended batches whose collection waits while shards are still being submitted one tick
    at a time (a provider queue's limit being learned admits one batch per validation): they
    are then collected in one range run instead of one run each (a run costs ~0.3 s of CPU).
    They wait at most ``MAX_WAIT_S`` or until ``MAX_SHARDS`` are due, so progress stays live."""

    MAX_WAIT_S = 20.0
    MAX_SHARDS = 16

    def __init__(self) -> None:
        self.shards: list[str] = []
        self.since = 0.0

    def add(self, shards: list[str]) -> None:
        if shards and not self.shards:
            self.since = time.monotonic()
        self.shards.extend(s for s in dict.fromkeys(shards) if s not in self.shards)

    def due(self, submitting: bool) -> bool:
        """Collect now: nothing else to run this tick, enough shards, or they waited long."""
        if not self.shards:
            return False
        waited = time.monotonic() - self.since
        return not submitting or len(self.shards) >= self.MAX_SHARDS or waited > self.MAX_WAIT_S

    def take(self) -> list[str]:
        shards, self.shards = self.shards, []
        return shards


def job_counts(state: JobState) -> Counts:
    """Where the job stands: shards submitted and final, rows done, spend so far."""
    manifest = state.manifest() or []
    summaries = [state.summary(s.key) for s in manifest]
    stopped = state.stop_reason() is not None
    filled = state.unsharded_rows()  # answered from the store: done from the start
    done = sum(m.rows for m, s in zip(manifest, summaries, strict=True) if s and s.final)
    return Counts(
        total_shards=len(manifest),
        submitted=sum(1 for s in manifest if state.submission(s.key, 1)),
        finished=sum(1 for s in summaries if s and (s.final or stopped)),
        total_rows=sum(m.rows for m in manifest) + filled,
        rows_done=done + filled,
        spent_usd=sum(s.cost_usd for s in summaries if s),
    )


class _Namespace:
    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)
