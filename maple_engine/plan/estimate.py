"""Token and cost estimates before anything is sent, and the budget guard on submissions.

Prompt tokens use the emulator's documented formula, the same as
`maple_engine.ledger.pricing.estimate_request_tokens`, vectorised in polars over the rendered
prompt text:
per message (the system prompt counts as one) ``max(1, ceil(chars / 4)) + 3``, plus 3 for the
reply primer; image parts count nothing. It matches the emulator's counts exactly and OpenAI's
"about 4 characters per token" rule within a few percent for English text.

Output tokens are a worst case: the request's ``max_completion_tokens`` / ``max_tokens`` /
``max_output_tokens`` parameter when set, else `DEFAULT_OUTPUT_ESTIMATE` per request. The dry run
counts the expected prompt-cache reads and writes (`maple_engine.plan.cache_layout`); the budget
guard assumes none (no discount), so it errs on the high side.

Estimates stream: shard by shard from the job's shard files, or block by block from the input
(``maple enrich --dry-run`` on a job that was never sharded), never the whole table at once.

The budget guard that uses these estimates is `maple_engine.submit.budget`.
"""

import dataclasses
from collections.abc import Iterator

import numpy as np
import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.files import block_rows
from maple_engine.inputs.sources import iter_blocks
from maple_engine.inputs.tokens import (
    output_tokens_per_request,
    prompt_tokens_expr,
    token_columns,
)
from maple_engine.inputs.uploads import FileUploads, file_uploads
from maple_engine.ledger.pricing import ModelPrice, TokenUsage, cost_usd
from maple_engine.model import CUSTOM_ID, ROW_ID, ShardInfo
from maple_engine.plan.dry_plan import TOKENS, SendPlan, plan_sends
from maple_engine.plan.sharding import checked_blocks, with_text
from maple_engine.plan.shards import ShardCutter
from maple_engine.providers.base import Wire
from maple_engine.spec import JobSpec
from maple_engine.state import JobState
from maple_engine.storage.storage import Storage


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Estimated requests, tokens and size of some requests (a batch, a shard, a job)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    shards: int = 0
    bytes: int = 0

    def __add__(self, other: "Estimate") -> "Estimate":
        return Estimate(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )

    def usage(self, cache: TokenUsage | None = None) -> TokenUsage:
        """The estimated usage; ``cache``: the expected cache reads and writes among its input."""
        usage = TokenUsage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)
        if cache is None:
            return usage
        cached = min(cache.cached_input_tokens, usage.input_tokens)
        written = min(cache.cache_write_tokens, usage.input_tokens - cached)
        return dataclasses.replace(usage, cached_input_tokens=cached, cache_write_tokens=written)

    def cost(self, price: ModelPrice, batch: bool, cache: TokenUsage | None = None) -> float:
        """Estimated USD at batch (``batch=True``) or real-time prices, with ``cache``'s
        expected reads and writes (`maple_engine.plan.cache_layout`) when given."""
        return cost_usd(price, self.usage(cache), batch)


def frame_estimate(frame: pl.DataFrame, spec: JobSpec, provider: str) -> Estimate:
    """Estimate for one request per row of ``frame`` (which holds the template's columns)."""
    if frame.height == 0:
        return Estimate()
    tokens = frame.select(prompt_tokens_expr(spec, provider).sum()).item()
    output = output_tokens_per_request(spec.params, spec.kind) * frame.height
    return Estimate(frame.height, int(tokens), output)


def _shard_columns(spec: JobSpec) -> list[str]:
    return [CUSTOM_ID, *token_columns(spec)]


def rows_estimate(
    state: JobState, spec: JobSpec, provider: str, shards: list[ShardInfo], rows: list[int]
) -> Estimate:
    """Estimate of the requests of some rows (by row id) of the job's ``shards``."""
    wanted = pl.Series(rows, dtype=pl.Int64).implode()
    parts = [
        state.scan_shard(s.key)
        .filter(pl.col(ROW_ID).is_in(wanted))
        .select(_shard_columns(spec))
        .collect()
        for s in shards
        if any(s.first_row <= i <= s.last_row for i in rows)
    ]
    return frame_estimate(pl.concat(parts), spec, provider) if parts else Estimate()


def estimate_shards(state: JobState, spec: JobSpec, provider: str) -> Estimate:
    """Estimate of every shard of a sharded job, read one shard file at a time."""
    total = Estimate()
    for shard in state.manifest() or []:
        frame = state.shard_frame(shard.key, columns=_shard_columns(spec))
        total += dataclasses.replace(frame_estimate(frame, spec, provider), shards=1)
        total += Estimate(bytes=shard.bytes)
    return total


def estimate_attempt(
    state: JobState, spec: JobSpec, provider: str, shard: str, attempt: int
) -> Estimate:
    """Estimate of one attempt of one shard: the rows of its plan (the whole shard at first)."""
    frame = state.shard_frame(shard, columns=_shard_columns(spec))
    plan = state.plan(shard, attempt)
    if plan is not None:
        frame = frame.join(plan.select(CUSTOM_ID), on=CUSTOM_ID, how="semi")
    return frame_estimate(frame, spec, provider)


def kept_estimate(
    state: JobState, spec: JobSpec, provider: str, shard: str, attempt: int
) -> Estimate:
    """`estimate_attempt`, made once and kept in the attempt's estimate file: the budget guard
    and the provider queue read the same requests and tokens of an attempt, however often they
    ask and from whichever process."""
    record = state.estimate_record(shard, attempt)
    if record is not None:
        names = {f.name for f in dataclasses.fields(Estimate)}
        return Estimate(**{k: int(v) for k, v in record.items() if k in names})
    made = estimate_attempt(state, spec, provider, shard, attempt)
    state.write_estimate_record(shard, attempt, dataclasses.asdict(made))
    return made


def _prepared(
    spec: JobSpec,
    provider: Wire,
    blocks: Iterator[pl.DataFrame],
    cutter: ShardCutter,
    uploads: FileUploads | None = None,
) -> Iterator[pl.DataFrame]:
    """The input's rows as the job would encode them (row id, key, ``_size``), with each row's
    estimated prompt tokens (``_tokens``); checked as sharding checks them, and cut into the
    same shard plan (by request count and encoded bytes) in ``cutter``."""
    rows = 0
    for _, prepared in checked_blocks(blocks, spec, provider, cutter.max_bytes, uploads):
        sizes = prepared.get_column("_size").to_numpy().astype(np.int64)
        for _ in cutter.feed(sizes):
            pass
        yield prepared.with_columns(prompt_tokens_expr(spec, provider.provider_name).alias(TOKENS))
        rows += prepared.height
    if rows == 0:
        raise ConfigError("The input table has no rows: there is nothing to enrich.")


def _cutter(spec: JobSpec, provider: Wire) -> ShardCutter:
    limits = provider.limits()
    max_requests = min(spec.max_requests_per_batch, limits.max_requests)
    return ShardCutter(max_requests, min(spec.max_batch_bytes, limits.max_bytes))


def _shards(cutter: ShardCutter) -> int:
    return cutter.shard + (1 if cutter.count else 0)


def estimate_input(spec: JobSpec, provider: Wire, blocks: Iterator[pl.DataFrame]) -> Estimate:
    """Estimate straight from the input, streaming: the same shard plan the job would cut
    (by request count and encoded bytes), without writing anything."""
    cutter = _cutter(spec, provider)
    per_request = output_tokens_per_request(spec.params, spec.kind)
    total = Estimate()
    for rows in _prepared(spec, provider, blocks, cutter):
        tokens, size = rows.select(pl.col(TOKENS).sum(), pl.col("_size").sum()).row(0)
        total += Estimate(rows.height, int(tokens), per_request * rows.height, 0, int(size))
    return dataclasses.replace(total, shards=_shards(cutter))


def estimate_sends(
    spec: JobSpec, provider: Wire, storage: Storage, *, retry_failed: bool = False
) -> tuple[Estimate, SendPlan]:
    """What a run of the job would send now: the input's requests minus those the response
    store answers and the repeats of identical requests (`maple_engine.plan.dry_plan`)."""
    if spec.source is None:
        raise ConfigError(f"Job {spec.name!r} has no input path to estimate from.")
    cutter = _cutter(spec, provider)
    uploads = file_uploads(storage, spec.provider, provider, dry_run=True)  # stand-in ids
    blocks = iter_blocks(spec.source, block_rows(spec), storage.s3)
    rows = _prepared(spec, provider, blocks, cutter, uploads)
    plan = plan_sends(
        storage,
        spec.name,
        rows,
        reuse=spec.reuse,
        retry_failed=retry_failed,
        sendable=lambda block: with_text(block, spec),
    )
    output = output_tokens_per_request(spec.params, spec.kind) * plan.sent
    estimate = Estimate(plan.sent, plan.input_tokens, output, _shards(cutter), plan.bytes)
    return estimate, plan


def estimate_job(state: JobState, spec: JobSpec, provider: Wire) -> Estimate:
    """The whole job: from its shard files once sharded, else streaming from the input."""
    if state.manifest() is not None:
        return estimate_shards(state, spec, provider.provider_name)
    if spec.source is None:
        raise ConfigError(f"Job {spec.name!r} has no input path and no shards to estimate yet.")
    blocks = iter_blocks(spec.source, block_rows(spec), state.storage.s3)
    return estimate_input(spec, provider, blocks)
