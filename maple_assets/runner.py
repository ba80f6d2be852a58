"""``maple enrich``'s driver: the enrichment's asset graph, in-process, against a persistent
Dagster instance, ticking the enrichment's own sensor until every shard is final (no daemon)."""

import dataclasses
import os
import sys
import time
from typing import Any

import dagster as dg

from maple_assets.factory import IO_MANAGER_KEY, Enrichment, job_for, provider_key
from maple_assets.merge import OutputTable
from maple_assets.steps import Job
from resources.costs import CostTracker
from resources.io_manager import ParquetIOManager
from resources.storage import StorageResource, is_remote


def instance_for(storage_root: str) -> dg.DagsterInstance:
    """``DAGSTER_HOME`` if set, else a persistent instance under the (local) storage root."""
    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    home = (
        os.path.join(os.path.expanduser("~"), ".maple", "dagster")
        if is_remote(storage_root)
        else os.path.join(os.path.abspath(storage_root), "dagster")
    )
    os.makedirs(home, exist_ok=True)
    return dg.DagsterInstance.from_config(home)


def resources_for(
    storage_root: str, provider: str, provider_resource: Any, cost_db: str | None
) -> dict[str, Any]:
    return {
        "maple_storage": StorageResource(root=storage_root),
        "maple_costs": CostTracker(storage_root=storage_root, database_url=cost_db),
        provider_key(provider): provider_resource,
        IO_MANAGER_KEY: ParquetIOManager(root=storage_root),
    }


@dataclasses.dataclass
class Progress:
    """A one-line progress report: shards submitted / finished, rows done, elapsed."""

    total_shards: int = 0
    submitted: int = 0
    finished: int = 0
    rows_done: int = 0
    started: float = dataclasses.field(default_factory=time.monotonic)
    quiet: bool = False

    def show(self) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        line = (
            f"shards submitted {self.submitted}/{self.total_shards}  finished "
            f"{self.finished}/{self.total_shards}  rows done {self.rows_done:,}  {elapsed:6.1f}s"
        )
        end = "\r" if sys.stderr.isatty() else "\n"
        print(line, end=end, file=sys.stderr, flush=True)


class Runner:
    def __init__(
        self,
        enrichment: Enrichment,
        resources: dict[str, Any],
        instance: dg.DagsterInstance,
        poll_interval_s: float = 1.0,
        quiet: bool = False,
        log_level: str = "WARNING",
    ) -> None:
        self.log_level = log_level
        self.enrichment = enrichment
        self.resources = resources
        self.instance = instance
        self.poll_interval_s = poll_interval_s
        self.progress = Progress(quiet=quiet)
        self.executed: set[str] = set()
        self.definitions = dg.Definitions(
            assets=enrichment.assets,
            asset_checks=enrichment.checks,
            sensors=enrichment.sensors,
            resources=resources,
        )

    def job(self) -> Job:
        return job_for(self.enrichment.spec, self.enrichment.policy, _Namespace(self.resources))

    def materialize(self, key: dg.AssetKey, partition: str | None = None) -> None:
        result = dg.materialize(
            [*self.enrichment.assets, *self.enrichment.checks],
            selection=dg.AssetSelection.assets(key),
            partition_key=partition,
            instance=self.instance,
            resources=self.resources,
            tags={"maple/driver": "cli"},
            run_config={"loggers": {"console": {"config": {"log_level": self.log_level}}}},
        )
        if not result.success:
            raise RuntimeError(f"run of {key.to_user_string()} [{partition}] failed")

    def tick(self) -> list[dg.RunRequest]:
        with (
            dg.partition_loading_context(dynamic_partitions_store=self.instance),
            dg.build_sensor_context(
                instance=self.instance, resources=self.resources, definitions=self.definitions
            ) as context,
        ):
            result = self.enrichment.sensor.evaluate_tick(context)
        return [r for r in result.run_requests or [] if r.run_key not in self.executed]

    def run(self) -> OutputTable:
        self.materialize(self.enrichment.key("input_shards"))
        merged_key = self.enrichment.merged_key
        while True:
            requests = self.tick()
            for request in requests:
                key = request.asset_selection[0] if request.asset_selection else merged_key
                self.materialize(key, request.partition_key)
                self.executed.add(str(request.run_key))
                if key == merged_key:
                    self._update()
                    return self._output()
            self._update()
            if not requests:
                time.sleep(self.poll_interval_s)

    def _update(self) -> None:
        job = self.job()
        manifest = job.state.manifest() or []
        self.progress.total_shards = len(manifest)
        summaries = [job.state.summary(s.key) for s in manifest]
        self.progress.submitted = sum(1 for s in manifest if job.state.submission(s.key, 1))
        self.progress.finished = sum(
            1 for s in summaries if s and (s.final or job.state.stop_reason())
        )
        self.progress.rows_done = sum(
            m.rows for m, s in zip(manifest, summaries, strict=True) if s and s.final
        )
        self.progress.show()

    def _output(self) -> OutputTable:
        data = self.job().state.storage.read_json(self.job().state.key("merged.json"))
        fmt = self.enrichment.spec.output_format()
        return OutputTable(path=data["path"], format=fmt, rows=int(data["rows"]))


class _Namespace:
    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)
