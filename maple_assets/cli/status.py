"""``maple status`` and ``maple cancel``: a job's progress from its state files, and a clean stop.

``status`` never calls the provider: everything comes from the files under the storage root
(``maple_engine.state``). ``cancel`` cancels the job's in-flight batches at the provider and
records a ``cancel`` stop; rerunning ``maple enrich`` with the same ``--job`` lifts the stop,
collects what the cancelled batches ran, and resends the rest.
"""

import sys
from collections.abc import Mapping
from typing import Any

import click
import orjson

from maple_assets.binding import job_decorations
from maple_assets.cli.queues import (
    job_queue_note,
    queue_lines,
    queue_status,
    rate_holder_lines,
)
from maple_assets.cli.tables import render
from maple_assets.provider_settings import settings_provider
from maple_assets.wiring import cost_ledger, job_eta_now, ledger_exists
from maple_engine.canary import last_canary
from maple_engine.collect.accounting import describe, line_figures
from maple_engine.collect.responses import summarize
from maple_engine.collect.retention import in_flight, job_expiring
from maple_engine.collect.shard_responses import shard_responses
from maple_engine.distill.plan import embedding_job, embedding_jobs
from maple_engine.distill.reports import distilled_jobs
from maple_engine.errors import ConfigError, MapleError
from maple_engine.ledger.queues import release_job
from maple_engine.ledger.schema import queue_slots
from maple_engine.model import LineTally
from maple_engine.plan.turnaround import history_fit
from maple_engine.providers.base import Lane
from maple_engine.providers.headers import parse_headers
from maple_engine.providers.registry import Built
from maple_engine.send.lane import lane_of
from maple_engine.settings import Settings
from maple_engine.spec import DEFAULTS
from maple_engine.state import JobState
from maple_engine.storage.layout import JobLayout, job_names
from maple_engine.storage.storage import Storage
from maple_engine.submit.cancel import cancel_job
from maple_engine.submit.stalls import Stall, stalled, turnaround_limit


def _storage(root: str | None) -> Storage:
    return Storage(Settings.load(storage=root).storage_root)


def list_jobs(storage: Storage) -> list[str]:
    """Names of the jobs under the storage root (folders with a ``state/spec.json``)."""
    names = job_names(storage.list_keys(""))
    return [n for n in names if storage.exists(JobLayout(n).spec)]


def shard_status(state: JobState, shard: str, rows: int) -> dict[str, Any]:
    """One shard: its next step, attempts, rows by status and failure class, cost, batches."""
    progress = state.progress(shard)
    summary = progress.summary
    subs = state.submissions(shard)
    first = state.plan(shard, 1)
    to_send = rows if first is None else first.height
    info: dict[str, Any] = {
        "shard": shard,
        "rows": rows,
        "reused": rows - to_send,  # filled from the response store, not sent
        "state": {"submit": "queued", "wait": "in flight", "done": "final"}[progress.action],
        "attempts": len(subs),
        "collected": summary.attempt if summary else 0,
        "succeeded": 0,
        "failed": 0,
        "failed_by_class": {},
        "pending_retry": summary.pending_retry if summary else 0,
        "cost_usd": 0.0,
        "batch_ids": [s.batch_id for s in subs],
        "lines": line_figures({}),
        **(summary.tally() if summary else LineTally()).figures(),
    }
    if progress.action == "done" and summary is not None and summary.pending_retry:
        info["state"] = "stopped"
    if summary is not None and summary.attempt:
        totals = summarize(shard_responses(state, shard))
        info.update(
            succeeded=totals["succeeded"],
            failed=totals["failed"],
            failed_by_class=totals["failed_by_class"],
            cost_usd=totals["cost_usd"],
            lines=line_figures(totals),
        )
    info["unfinished"] = to_send - info["succeeded"] - info["failed"]
    return info


def job_status(storage: Storage, job: str) -> dict[str, Any]:
    """The whole job as a JSON-ready dict."""
    state = JobState(storage, job)
    spec = state.read_spec()
    if spec is None:
        raise ConfigError(
            f"No job {job!r} under {storage.root}: run `maple status` to list jobs, or pass "
            "--storage with the root the job was run with."
        )
    manifest = state.manifest()
    shards = [shard_status(state, s.key, s.rows) for s in manifest or []]
    filled = state.unsharded_rows()  # rows no shard holds, all filled from the store
    by_class: dict[str, int] = {}
    for shard in shards:
        for cls, count in shard["failed_by_class"].items():
            by_class[cls] = by_class.get(cls, 0) + count
    merged = state.merged_record()
    return {
        "job": job,
        "model": spec["spec"].get("model"),
        "provider": spec["spec"].get("provider"),
        "phase": _phase(state, manifest is not None, shards),
        "stopped": state.stop_reason() or (_failed_canary(state) if manifest is None else None),
        "version": version.number if (version := state.version()) else None,
        "rows": sum(s["rows"] for s in shards) + filled,
        "succeeded": sum(s["succeeded"] for s in shards),
        "failed": sum(s["failed"] for s in shards),
        "reused": sum(s["reused"] for s in shards) + filled,
        "failed_by_class": dict(sorted(by_class.items())),
        "unfinished": sum(s["unfinished"] for s in shards),
        "lines": {key: sum(s["lines"][key] for s in shards) for key in line_figures({})},
        **{key: sum(s[key] for s in shards) for key in LineTally().figures()},
        "cost_usd": round(sum(s["cost_usd"] for s in shards), 8),
        "output": merged["path"] if merged is not None else None,
        "queue": job_queue_note(storage, job) or None,
        "stalled": [_stall_json(st) for st in _stalls(state, spec["spec"])],
        "expiring": [e.describe() for e in job_expiring(state, str(spec["spec"].get("provider")))],
        "eta": job_eta_now(state).to_json(),
        "sizing": (state.manifest_record() or {}).get("sizing"),
        "shards": shards,
    }


def _stall_json(stall: Stall) -> dict[str, Any]:
    sub = stall.submission
    return {
        "shard": sub.shard,
        "batch_id": sub.batch_id,
        "age_s": round(stall.age_s, 1),
        "limit_s": round(stall.limit_s, 1),
        "percentile": stall.percentile,
        "message": stall.describe(),
    }


def _stalls(state: JobState, spec: dict[str, Any]) -> list[Stall]:
    """The job's batches in flight longer than their provider and model's turnaround
    percentile in the batch history (none without a ledger or enough history)."""
    subs = in_flight(state)
    if not subs or not ledger_exists(state.storage.root):
        return []
    percentile = float(spec.get("stall_percentile") or 95)
    with cost_ledger(state.storage.root) as costs:
        model = str(spec.get("model"))
        limit = turnaround_limit(costs, subs[0].provider, model, percentile)
        fit = history_fit(costs, subs[0].provider, model) if limit is not None else None
    return stalled(subs, limit, percentile, fit=fit)


def _failed_canary(state: JobState) -> str | None:
    """The line of the canary that stopped the job before its shards were planned, if one did."""
    report = last_canary(state)
    stored = (state.read_spec() or {}).get("fingerprint")
    if report is None or report.passed or report.fingerprint != stored:
        return None
    return report.line()


def _phase(state: JobState, sharded: bool, shards: list[dict[str, Any]]) -> str:
    if not sharded:
        return "canary failed" if _failed_canary(state) else "sharding"
    merged = state.merged_record()
    version = state.version()
    if merged is not None and (version is None or merged.get("version") == version.number):
        return "merged"
    if state.stop_reason() is not None:
        return "stopped"
    if state.interrupted():
        return "interrupted"  # Ctrl-C: nothing runs here until the command is run again
    return "final" if all(s["state"] == "final" for s in shards) else "running"


def _table(status: dict[str, Any]) -> str:
    lines = [
        f"job {status['job']}  ({status['provider']}, {status['model']})  {status['phase']}",
        f"rows {status['rows']:,}  succeeded {status['succeeded']:,}  failed "
        f"{status['failed']:,}  reused {status['reused']:,}  unfinished "
        f"{status['unfinished']:,}  cost "
        f"${status['cost_usd']:.6f}",
    ]
    for cls, count in status["failed_by_class"].items():
        lines.append(f"  {cls:<20}{count:,}")
    lines.append(f"lines {describe(status['lines'])}{_tally_text(status)}")
    if status["stopped"]:
        lines.append(f"stopped: {status['stopped']}")
    if status["output"]:
        lines.append(f"output: {status['output']}")
    if status.get("queue") and status["phase"] not in ("merged", "final"):
        lines.append(f"queue: {status['queue']}")
    lines += [f"stalled: {st['message']}" for st in status["stalled"]]
    lines += [f"warning: {line}" for line in status["expiring"]]
    if status["phase"] not in ("merged", "final", "stopped"):
        lines.append(f"expected finish: {_eta_text(status['eta'])}")
    if status.get("sizing"):
        lines.append(f"shard size: {status['sizing']['size']:,} ({status['sizing']['reason']})")
    header = ["shard", "state", "attempts", "rows", "ok", "failed", "cost USD"]
    rows = []
    for s in status["shards"]:
        classes = ", ".join(f"{k}={v}" for k, v in s["failed_by_class"].items())
        rows.append(
            [
                s["shard"], s["state"], str(s["attempts"]), f"{s['rows']:,}",
                f"{s['succeeded']:,}", f"{s['failed']:,}", f"{s['cost_usd']:.6f}",
                f"{classes or '-'}  [{' '.join(s['batch_ids'])}]",
            ]
        )  # fmt: skip
    lines.append(render([*header, "failed by class / batches"], rows, align="llrrrrrl"))
    return "\n".join(lines)


def _tally_text(status: dict[str, Any]) -> str:
    """What the batches' files lacked (resent) or held beyond one line a request (ignored)."""
    said = [
        f"{status[key]:,} {what}"
        for key, what in (
            ("lines_missing", "missing from ended batches (resent)"),
            ("lines_duplicated", "duplicated (merged once)"),
            ("lines_unknown", "unknown (ignored)"),
        )
        if status[key]
    ]
    return f"; {', '.join(said)}" if said else ""


def _eta_text(eta: dict[str, Any]) -> str:
    if eta["p50"] is None:
        return str(eta["basis"])
    return f"p50 {eta['p50']}, p90 {eta['p90']} ({eta['basis']})"


@click.command("status")
@click.argument("job", required=False)
@click.option("--storage", default=None, help="Storage root; default MAPLE_STORAGE or ./.maple.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def status_command(job: str | None, storage: str | None, fmt: str) -> None:
    """Show JOB's shards, attempts, rows by status and failure class, and cost (or list jobs)."""
    store = _storage(storage)
    try:
        jobs = [job] if job else list_jobs(store)
        statuses = [job_status(store, name) for name in jobs]
    except MapleError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if fmt == "json":
        payload: Any = statuses[0] if job else statuses
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
    elif not statuses:
        click.echo(f"no jobs under {store.root}")
    elif job:
        click.echo(_table(statuses[0]))
    else:
        for line in job_lines(statuses, embedding_jobs(distilled_jobs(store))):
            click.echo(line)
    if not job and fmt == "table":
        for line in queue_lines(queue_status(store)) + rate_holder_lines(store.root):
            click.echo(line)


def job_lines(statuses: list[dict[str, Any]], grouped: dict[str, str]) -> list[str]:
    """One line per job; a distilled job's embedding job (``grouped``: embedding job to
    distilled job) on the line of the distilled job, whose cost is both jobs' (each shown)."""
    by_job = {s["job"]: s for s in statuses}
    lines = []
    for s in statuses:
        if grouped.get(s["job"]) in by_job:
            continue  # on its distilled job's line
        cost = f"${s['cost_usd']:.6f}"
        embedded = by_job.get(embedding_job(s["job"]))
        if embedded is not None:
            both = s["cost_usd"] + embedded["cost_usd"]
            cost = (
                f"${both:.6f} distilled (LLM ${s['cost_usd']:.6f}, embeddings "
                f"${embedded['cost_usd']:.6f}, {embedded['phase']})"
            )
        lines.append(
            f"{s['job']:<32}{s['phase']:<14}{s['rows']:>10,} rows  "
            f"{s['succeeded']:>10,} ok  {s['failed']:>8,} failed  {cost}"
            + (f"  {len(s['stalled'])} stalled" if s["stalled"] else "")
            + (f"  finish p90 {s['eta']['p90']}" if s["eta"]["p90"] else "")
        )
    return lines


def job_provider(state: JobState, base_url: str | None = None) -> tuple[Built, str]:
    """The job's provider, rebuilt from its stored spec at ``base_url`` if given (the job's
    ``--base-url``, which the spec does not keep), and the team it ran for."""
    spec = state.read_spec()
    if spec is None:
        raise ConfigError(f"No job {state.job!r} under {state.storage.root}.")
    name = str(spec["spec"]["provider"])
    settings = Settings.load(storage=state.storage.root)
    overrides = {"base_url": base_url.rstrip("/")} if base_url else {}
    provider = settings_provider(name, settings, settings.emulator_url, overrides)
    return provider, str(spec["spec"].get("team") or DEFAULTS.team)


def unmapped_team(provider: Built, team: str) -> str | None:
    """``team`` when the job ran for one that this shell's team attribution map does not list
    (its batches may be in the team's project, which these credentials cannot see)."""
    if team == DEFAULTS.team or team in provider.attribution_map().teams:
        return None
    return team


def team_lane(provider: Built, team: str, headers: Mapping[str, str] | None = None) -> Lane:
    """``provider`` sending ``headers`` (which the spec does not keep), on ``team``'s
    accounts, where its batches are."""
    return lane_of(provider.decorated(job_decorations(provider, headers=headers, team=team)))


def provider_for(
    state: JobState, headers: Mapping[str, str] | None = None, base_url: str | None = None
) -> Lane:
    """The job's provider (`job_provider`) sending ``headers`` on its team's accounts."""
    provider, team = job_provider(state, base_url)
    return team_lane(provider, team, headers)


def release_queue_slots(state: JobState) -> int:
    """Give the job's share of the provider queue budget back at once: other jobs need not
    wait for a job that is no longer running to see its cancelled batches end."""
    if not ledger_exists(state.storage.root):
        return 0
    with cost_ledger(state.storage.root) as costs, costs.transaction() as conn:
        return release_job(conn, queue_slots, state.job)


@click.command("cancel")
@click.argument("job")
@click.option("--storage", default=None, help="Storage root; default MAPLE_STORAGE or ./.maple.")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="A header the job's provider calls need (a gateway's), as `maple enrich` took it.",
)
@click.option("--base-url", default=None, help="The job's --base-url, if `maple enrich` had one.")
def cancel_command(
    job: str, storage: str | None, headers: tuple[str, ...], base_url: str | None
) -> None:
    """Cancel JOB's provider batches and stop it; rerun `maple enrich --job JOB` to resume."""
    state = JobState(_storage(storage), job)
    try:
        provider, team = job_provider(state, base_url)
        lane = team_lane(provider, team, parse_headers(headers))
        batches = cancel_job(state, lane, unmapped_team(provider, team))
    except MapleError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    released = release_queue_slots(state)
    click.echo(f"job {job}: cancelled {len(batches)} batch(es)")
    for sub in batches:
        click.echo(f"  {sub.shard} attempt {sub.attempt}: {sub.batch_id}")
    if released:
        click.echo(f"released {released} batch(es) from the provider queue budget")
    click.echo("resume with the same `maple enrich ... --job " + job + "` command")
