"""``maple enrich --dry-run``: the plan and the estimate of what a run would send now."""

import dataclasses
import time
from typing import Any

import click

from maple_engine.distill.plan import embedding_spec
from maple_engine.inputs.tokens import MAX_TOKEN_PARAMS, output_tokens_per_request
from maple_engine.job import Job
from maple_engine.ledger.price_book import PriceBook
from maple_engine.ledger.pricing import ModelPrice
from maple_engine.plan.cache_layout import cache_layout
from maple_engine.plan.dry_plan import SendPlan
from maple_engine.plan.estimate import estimate_job, estimate_sends
from maple_engine.plan.sharding import shard_limits
from maple_engine.plan.turnaround import Sizing, choose_size
from maple_engine.providers.file_inputs import URL_ESTIMATE
from maple_engine.providers.registry import Built
from maple_engine.report.batch_stats import duration_text
from maple_engine.send.lane import lane_of
from maple_engine.settings import Settings
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.layout import DistillPaths
from maple_engine.storage.storage import Storage
from maple_engine.submit.sizing import plan_size


def dry_run(
    spec: JobSpec, provider: Built, price: ModelPrice, storage: str, retry_failed: bool = False
) -> int:
    """Print the plan and the estimate of what a run would send now (rows the response store
    answers are not sent, nor priced); no upload, no batch, no file written."""
    if spec.source is not None:
        plan, sends = estimate_sends(spec, provider, Storage(storage), retry_failed=retry_failed)
        requests = f"{plan.requests:,} to send of {sends.rows:,} rows" + _not_sent(sends)
    else:
        plan = estimate_job(JobState(Storage(storage), spec.name), spec, provider)
        requests = f"{plan.requests:,}"
    from maple_assets.wiring import cost_ledger  # Dagster loads with the wiring

    sizing = _sizing(spec, provider, storage, plan.requests)
    if sizing is not None:
        plan = dataclasses.replace(plan, shards=max(plan.shards, sizing.shards))
    layout = cache_layout(spec)
    cache = layout.expected_usage(plan.requests, plan.shards)
    batch, realtime = plan.cost(price, True, cache), plan.cost(price, False, cache)
    per_request = output_tokens_per_request(spec.params, spec.kind)
    rows = [
        ("job", spec.name),
        ("provider", spec.provider),
        ("model", spec.model),
        ("shards", f"{plan.shards:,}"),
        ("requests", requests),
        ("bytes", f"{plan.bytes:,}"),
        ("input tokens", f"~{plan.input_tokens:,} ({_input_note(spec)})"),
        *(
            [("output tokens", f"<= {plan.output_tokens:,} ({_output_note(spec, per_request)})")]
            if per_request
            else []
        ),
        ("prompt cache", layout.describe()),
        (
            "cached tokens",
            f"~{cache.cached_input_tokens:,} read, ~{cache.cache_write_tokens:,} written",
        ),
        ("batch USD", f"~{batch:.6f}"),
        ("real-time USD", f"~{realtime:.6f}"),
        ("batch saves", f"~{realtime - batch:.6f} USD{percent(realtime - batch, realtime)}"),
        ("price", price.source),
    ]
    turnaround = _batch_note(provider)
    if turnaround:
        rows.insert(next(i for i, r in enumerate(rows) if r[0] == "bytes") + 1, turnaround)
    if sizing is not None:
        at = next(i for i, r in enumerate(rows) if r[0] == "shards") + 1
        rows[at:at] = _sizing_rows(sizing)
    with cost_ledger(storage) as costs:
        paid = costs.job_total(spec.name)
        entries = costs.job_entries(spec.name)
    if paid:
        rows.append(("spent USD", f"{paid:.6f} so far (this job, from the ledger)"))
    thinks = _reasoning_note(spec, provider, entries, plan.requests, price)
    if thinks:
        rows.insert(next(i for i, r in enumerate(rows) if r[0] == "prompt cache"), thinks)
    if spec.distill and spec.source is not None:
        priced = (
            batch if provider.mode == "batch" or provider.capabilities.batch_prices else realtime
        )
        rows.extend(_distill_rows(spec, provider, storage, priced, sends.rows))
    if spec.budget_usd is not None:
        priced_as_batch = provider.mode == "batch" or provider.capabilities.batch_prices
        expected = batch if priced_as_batch else realtime
        fits = "fits" if expected <= spec.budget_usd else "the job will stop before the end"
        rows.append(("budget USD", f"{spec.budget_usd:.6f} ({fits})"))
    click.echo("dry run: nothing uploaded, no batch created, nothing spent")
    for label, value in rows:
        click.echo(f"{label:<15}{value}")
    return 0


def _input_note(spec: JobSpec) -> str:
    """How the input tokens are estimated: text by characters; files, with --file-column, by
    the provider's rule, and a URL file (not fetched up front) by its kind's stand-in."""
    note = "estimated: about 4 characters per token"
    if spec.file_columns:
        note += f"; files by the provider's rule, a URL unread: {URL_ESTIMATE}"
    return note


def _distill_rows(
    spec: JobSpec, provider: Built, storage: str, llm_usd: float, rows: int
) -> list[tuple[str, str]]:
    """With --distill: the cost with distillation (every row embedded, the sample and the rows
    the classifier is unsure of sent to the LLM) beside the cost of sending every row."""
    embed = embedding_spec(spec, Storage(storage).uri(DistillPaths(spec.name).embeddings))
    plan, _ = estimate_sends(embed, provider, Storage(storage))
    price = PriceBook(Settings.load(storage=storage).prices).price(
        embed.model, embed.provider, allow_untracked=spec.allow_untracked_cost
    )
    embedded = plan.cost(price, provider.mode == "batch" or provider.capabilities.batch_prices)
    sample = min(spec.distill_sample, rows) / max(1, rows)
    least, most = embedded + llm_usd * sample, embedded + llm_usd
    return [
        (
            "with --distill",
            f"~{least:.6f} to ~{most:.6f} USD: embeddings ~{embedded:.6f} ({embed.model}, "
            f"{plan.requests:,} to send) plus the LLM on the {min(spec.distill_sample, rows):,}"
            "-row sample and on the rows the classifier is unsure of (every row if the gate "
            "refuses)",
        ),
        ("without", f"~{llm_usd:.6f} USD: every row through the LLM"),
    ]


def _sizing(spec: JobSpec, provider: Built, storage: str, requests: int) -> Sizing | None:
    """The shard size a run would choose now for a batch provider, and its expected finish
    (`maple_engine.submit.sizing`), from the ledger's batch history."""
    from maple_assets.wiring import cost_ledger, ledger_exists

    if provider.mode != "batch" or requests <= 0:
        return None
    if not ledger_exists(storage):
        return choose_size(requests, None, None, shard_limits(spec, provider)[0])
    with cost_ledger(storage) as costs:
        job = Job(spec, JobState(Storage(storage), spec.name), lane_of(provider), costs)
        return plan_size(job, requests, time.time())


def _sizing_rows(sizing: Sizing) -> list[tuple[str, str]]:
    if sizing.p50_s is None or sizing.p90_s is None:
        finish = "expected finish unknown: no batch history for this provider and model yet"
    else:
        finish = (
            f"expected finish p50 {duration_text(sizing.p50_s)}, p90 "
            f"{duration_text(sizing.p90_s)} after the first submission (batch history)"
        )
    return [
        ("shard size", f"{sizing.size:,} requests ({sizing.shards:,} shard(s))"),
        ("why", sizing.reason),
        ("ETA", finish),
    ]


def _batch_note(provider: Built) -> tuple[str, str] | None:
    """How long a batch may run and what caps its queue, as the provider documents them."""
    caps = provider.capabilities
    if caps.mode != "batch" or not caps.completion_windows:
        return None
    window = getattr(provider, "completion_window", caps.completion_windows[0])
    if caps.windows_expire:
        ends = f"window {window}: a batch still running then expires, its unrun rows sent again"
    else:
        ends = f"window {window} is a target: a batch that takes longer is not expired"
    if caps.queue == "enqueued-tokens":
        ends += f"; enqueued tokens limited per {caps.queue_scope}"
    return ("batches", ends)


def _not_sent(sends: SendPlan) -> str:
    parts = []
    if sends.reused:
        parts.append(f"{sends.reused:,} answered by the response store: --no-reuse sends them")
    if sends.duplicates:
        parts.append(f"{sends.duplicates:,} repeat an identical request: answered once")
    empty = sends.rows - sends.sent - sends.reused - sends.duplicates
    if empty:
        parts.append(f"{empty:,} with an empty text: never sent")
    return f" ({'; '.join(parts)})" if parts else ""


def _output_note(spec: JobSpec, per_request: int) -> str:
    if any(name in spec.params for name in MAX_TOKEN_PARAMS):
        return f"{per_request:,} per request: the max tokens parameter"
    return f"{per_request:,} per request assumed; --param max_tokens=N sets a limit"


def _reasoning_note(
    spec: JobSpec, provider: Built, entries: list[Any], requests: int, price: ModelPrice
) -> tuple[str, str] | None:
    """What the estimate says of reasoning tokens, for a model that reasons: it cannot foresee
    them, unless the job's rows so far (the ledger) show how many each spends."""
    able = provider.capabilities
    models = able.reasoning_models
    reasons = any(p in spec.params for p in able.rules.reasoning_params) or (
        bool(models) and spec.model.startswith(models)
    )
    if not reasons:
        return None
    done = sum(e.requests for e in entries)
    spent = sum(e.reasoning_tokens for e in entries)
    if not done or not spent:
        bound = (
            "a max output tokens parameter bounds them"
            if any(name in spec.params for name in MAX_TOKEN_PARAMS)
            else "--param max_output_tokens=N (max_completion_tokens on chat) bounds them"
        )
        return ("reasoning", f"not in the estimate: reasoning tokens cannot be foreseen ({bound})")
    each = spent / done
    extra = each * requests * price.output_per_mtok / 1e6
    return (
        "reasoning",
        f"~{each:,.0f} tokens per request (this job's {done:,} sent so far): about "
        f"{extra:.6f} USD more at real-time output prices",
    )


def percent(part: float, whole: float) -> str:
    return f" ({part / whole:.0%})" if whole > 0 else ""
