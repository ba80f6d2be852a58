"""``maple emulator``: serve the provider emulator in the foreground."""

import click

from emulator.config import (
    FAULT_CLASSES,
    EmulatorConfig,
    parse_fail,
    parse_organizations,
    parse_workspaces,
)
from emulator.core.labels import RULES
from emulator.core.ratelimit import LIMITERS


@click.command("emulator")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8787, show_default=True, type=int, help="Port to listen on.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for fault draws.")
@click.option(
    "--batch-seconds",
    "batch_seconds",
    default=2.0,
    show_default=True,
    type=float,
    metavar="S",
    help="How long a batch takes to finish.",
)
@click.option(
    "--batch-seconds-spread",
    "batch_seconds_spread",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    metavar="SIGMA",
    help="Draw each batch's duration from a log-normal with this sigma around --batch-seconds.",
)
@click.option(
    "--batch-seconds-per-1k",
    "batch_seconds_per_1k",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    metavar="S",
    help="Each batch takes S seconds more per 1,000 requests in it (on top of --batch-seconds).",
)
@click.option(
    "--stall",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    metavar="RATE",
    help="Share of batches left in progress 50 times longer than drawn (stalled).",
)
@click.option(
    "--drop-lines",
    "drop_lines",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    metavar="FRACTION",
    help="Share of answered lines a batch that ran every request leaves out of its results "
    "(still counted succeeded; not billed).",
)
@click.option(
    "--duplicate-lines",
    "duplicate_lines",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    metavar="FRACTION",
    help="Share of answered lines a batch writes twice in its results (billed once).",
)
@click.option(
    "--fail",
    "fail",
    multiple=True,
    metavar="CLASS=RATE",
    help=f"Inject a fault class at a rate in [0, 1] (repeatable): {', '.join(FAULT_CLASSES)}.",
)
@click.option(
    "--rpm", type=int, default=None, help="Real-time requests per minute (see --burst-seconds)."
)
@click.option(
    "--tpm", type=int, default=None, help="Real-time tokens per minute (see --burst-seconds)."
)
@click.option(
    "--burst-seconds",
    "burst_seconds",
    default=1.0,
    show_default=True,
    type=float,
    metavar="S",
    help="Enforce --rpm/--tpm over S-second windows holding S/60 of the limit (60: full minute); "
    "with --limiter bucket, the bucket holds S seconds of the limit.",
)
@click.option(
    "--limiter",
    type=click.Choice(LIMITERS),
    default="window",
    show_default=True,
    help="How --rpm/--tpm are enforced: fixed windows of --burst-seconds, or a continuous token "
    "bucket refilled at the limit and holding --burst-seconds of it.",
)
@click.option(
    "--s3-endpoint",
    default=None,
    metavar="URL",
    help="S3 API the Bedrock batch jobs read inputs from and write outputs to.",
)
@click.option(
    "--enqueued-token-limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="OpenAI batches: prompt tokens enqueued per model (validating, in progress, "
    "finalizing); a batch past it fails with token_limit_exceeded.",
)
@click.option(
    "--anthropic-queue-limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Anthropic Message Batches: requests in unfinished batches; a create past it gets 429.",
)
@click.option(
    "--organization",
    "organizations",
    multiple=True,
    metavar="KEY=ORG",
    help="Put an API or admin key in organisation ORG (repeatable; other keys share one): the "
    "admin usage and cost reports show an organisation's spend from all its keys.",
)
@click.option(
    "--workspace",
    "workspaces",
    multiple=True,
    metavar="KEY=WORKSPACE",
    help="Put an Anthropic API key in workspace WORKSPACE (repeatable; other keys are in the "
    "default workspace): the admin reports group its spend by workspace_id.",
)
@click.option(
    "--flex-unavailable",
    "flex_unavailable",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    metavar="RATE",
    help='OpenAI flex tier: answer this share of service_tier "flex" requests 429 '
    "resource_unavailable.",
)
@click.option(
    "--gemini-batch-slots",
    "gemini_batch_slots",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Gemini batches running at once; the others wait, highest batch.priority first "
    "(default: no limit).",
)
@click.option(
    "--priority-speedup",
    "priority_speedup",
    type=click.FloatRange(1.0),
    default=4.0,
    show_default=True,
    metavar="FACTOR",
    help='OpenAI priority tier: service_tier "priority" answers take the --latency divided by '
    "FACTOR (billed at twice the standard price).",
)
@click.option(
    "--gemini-priority-limit",
    "gemini_priority_limit",
    type=click.IntRange(0),
    default=None,
    metavar="N",
    help='Gemini priority tier: serve the first N "serviceTier": "priority" requests at '
    "priority and the later ones at standard (x-gemini-service-tier: standard), as Gemini "
    "does over a project's priority limit (default: no limit).",
)
@click.option(
    "--gemini-file-retention",
    "gemini_file_retention",
    type=click.FloatRange(0, min_open=True),
    default=48 * 3600,
    show_default=True,
    metavar="SECONDS",
    help="Gemini Files API: how long an uploaded file lives before it is deleted (Google keeps "
    "files 48 hours); a request naming a deleted file is answered 403 PERMISSION_DENIED.",
)
@click.option(
    "--latency",
    default="0",
    show_default=True,
    metavar="LOW-HIGH",
    help="Seconds each real-time answer takes beyond the limiter, drawn uniformly from LOW to "
    "HIGH (one number: always that long).",
)
@click.option(
    "--server-slots",
    default=0,
    show_default=True,
    type=int,
    metavar="N",
    help="A model server's capacity: at most N real-time answers worked on at once (each "
    "--latency long), the rest queue, and no rate-limit headers; 0: unbounded.",
)
@click.option(
    "--ignore-dimensions",
    is_flag=True,
    help="Answer embeddings at the model's own length whatever dimensions asks, as a server "
    "that does not shorten vectors (or a gateway that drops the field) does.",
)
@click.option(
    "--label-rule",
    type=click.Choice(RULES),
    default="first",
    show_default=True,
    help="How a reply of one enum or boolean field is chosen: first (the first enum value, "
    "true) or keywords (the first enum value whose words are in the prompt; a boolean: the "
    "field name's words are in the prompt).",
)
@click.option(
    "--label-noise",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    metavar="FRACTION",
    help="Flip this share of --label-rule keywords answers, the same prompts every time.",
)
@click.option(
    "--fetch-urls",
    is_flag=True,
    help="Fetch the http(s) URLs of image and file parts as a provider does: the reply names "
    "the file by a digest of its bytes, its tokens are billed, and one that cannot be fetched "
    "fails its request.",
)
@click.option(
    "--no-usage",
    "omit_usage",
    is_flag=True,
    help="Answer without token usage (OpenAI's usage, Gemini's usageMetadata), as some servers "
    "and Gemini embedding replies do.",
)
@click.option(
    "--require-header",
    "required_headers",
    multiple=True,
    metavar="NAME[=VALUE]",
    help="Act as a gateway that needs header NAME on every provider call (repeatable): a call "
    "without it is answered 400 naming it; with =VALUE, one carrying another value is answered "
    "401.",
)
@click.option(
    "--require-body-field",
    "required_body_fields",
    multiple=True,
    metavar="NAME",
    help="Act as a gateway that needs field NAME in the batch create's JSON body and the file "
    "upload's form (repeatable): a call without it is answered 400 naming it.",
)
@click.option(
    "--gateway-nulls",
    is_flag=True,
    help="Return batch and file objects as LiteLLM's proxy re-shapes them: null for every "
    "absent optional field (request_counts until known), plus fields the API does not define.",
)
@click.option(
    "--completion-window",
    "completion_windows",
    multiple=True,
    metavar="W",
    help="A completion_window OpenAI-compatible batch creates accept (repeatable; default 24h).",
)
@click.option(
    "--webhook-url",
    metavar="URL",
    help="Push a signed OpenAI batch event (batch.completed, .failed, .expired, .cancelled) "
    "to URL when an OpenAI batch ends, as OpenAI's webhooks do.",
)
@click.option(
    "--webhook-secret",
    metavar="SECRET",
    help="The signing secret of --webhook-url's events (whsec_ + base64, like OpenAI's).",
)
def emulator_command(
    *,
    host: str,
    port: int,
    seed: int,
    batch_seconds: float,
    batch_seconds_spread: float,
    batch_seconds_per_1k: float,
    stall: float,
    drop_lines: float,
    duplicate_lines: float,
    fail: tuple[str, ...],
    rpm: int | None,
    tpm: int | None,
    burst_seconds: float,
    limiter: str,
    s3_endpoint: str | None,
    enqueued_token_limit: int | None,
    anthropic_queue_limit: int | None,
    organizations: tuple[str, ...],
    workspaces: tuple[str, ...],
    flex_unavailable: float,
    gemini_batch_slots: int | None,
    priority_speedup: float,
    gemini_priority_limit: int | None,
    gemini_file_retention: float,
    latency: str,
    server_slots: int,
    ignore_dimensions: bool,
    label_rule: str,
    label_noise: float,
    fetch_urls: bool,
    omit_usage: bool,
    required_headers: tuple[str, ...],
    required_body_fields: tuple[str, ...],
    gateway_nulls: bool,
    completion_windows: tuple[str, ...],
    webhook_url: str | None,
    webhook_secret: str | None,
) -> None:
    """Serve a local emulator of the OpenAI (and Azure OpenAI), Anthropic, Gemini and Bedrock
    batch APIs."""
    try:
        rates = parse_fail(list(fail))
        config = EmulatorConfig(
            host=host,
            port=port,
            seed=seed,
            batch_seconds=batch_seconds,
            batch_seconds_spread=batch_seconds_spread,
            batch_seconds_per_1k=batch_seconds_per_1k,
            stall=stall,
            drop_lines=drop_lines,
            duplicate_lines=duplicate_lines,
            fail=rates,
            rpm=rpm,
            tpm=tpm,
            burst_seconds=burst_seconds,
            limiter=limiter,
            s3_endpoint=s3_endpoint,
            enqueued_token_limit=enqueued_token_limit,
            anthropic_queue_limit=anthropic_queue_limit,
            organizations=parse_organizations(organizations),
            workspaces=parse_workspaces(workspaces),
            flex_unavailable=flex_unavailable,
            priority_speedup=priority_speedup,
            gemini_priority_limit=gemini_priority_limit,
            gemini_file_retention_s=gemini_file_retention,
            gemini_batch_slots=gemini_batch_slots,
            realtime_latency_s=parse_latency(latency),
            server_slots=server_slots,
            omit_usage=omit_usage,
            ignore_dimensions=ignore_dimensions,
            label_rule=label_rule,
            label_noise=label_noise,
            fetch_urls=fetch_urls,
            required_headers=required_headers,
            required_body_fields=required_body_fields,
            gateway_nulls=gateway_nulls,
            completion_windows=completion_windows or ("24h",),
            webhook_url=webhook_url,
            webhook_secret=webhook_secret,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    base = f"http://{host}:{port}"
    click.echo(f"Maple provider emulator on {base}")
    click.echo(f"  OpenAI base URL:    {base}/v1")
    click.echo(f"  Anthropic base URL: {base}")
    click.echo(f"  Gemini base URL:    {base}")
    click.echo(f"  Bedrock endpoint:   {base}")
    click.echo(f"  Azure OpenAI:       {base}  (/openai/..., ?api-version=, api-key header)")
    click.echo("Export these to point clients at it:")
    click.echo(f"  export OPENAI_BASE_URL={base}/v1")
    click.echo(f"  export ANTHROPIC_BASE_URL={base}")
    click.echo(f"  export GEMINI_BASE_URL={base}")
    click.echo(f"  export AWS_ENDPOINT_URL_BEDROCK={base}")
    click.echo(f"  export AZURE_OPENAI_ENDPOINT={base}")
    click.echo(f"Stats: {base}/_emulator/stats  (Ctrl-C to stop)")
    click.echo("Admin keys for usage and cost reports: sk-admin-... (OpenAI), sk-ant-admin...")
    from emulator.server import serve  # starlette and uvicorn: only when serving

    serve(config)


def parse_latency(given: str) -> tuple[float, float]:
    """``LOW-HIGH`` (or one number) as seconds."""
    low, _, high = given.partition("-")
    try:
        return float(low), float(high or low)
    except ValueError:
        raise ValueError(f"--latency {given!r}: give seconds as LOW-HIGH, e.g. 0.2-0.5") from None
