"""Checks on the input's columns and rows, run before anything is uploaded.

Shared by the CLI pre-flight (on the input's schema, before the job starts) and by
``input_shards`` (on the first block, and the context window on every block), so a job declared
in code gets the same errors as ``maple enrich``.
"""

import polars as pl

from maple_engine.errors import ConfigError
from maple_engine.inputs.templates import JSON_SUFFIX, Placeholder, check_columns, parse_template
from maple_engine.inputs.tokens import MAX_TOKEN_PARAMS, prompt_tokens_expr
from maple_engine.ledger.price_book import context_window
from maple_engine.model import ROW_ID
from maple_engine.providers.registry import capabilities
from maple_engine.spec import JobSpec, validate_columns


def is_nested(dtype: pl.DataType) -> bool:
    return isinstance(dtype, (pl.List, pl.Array, pl.Struct, pl.Object))


def check_input_schema(schema: pl.Schema, spec: JobSpec) -> None:
    """Columns exist, template fields are text-like, the output format can hold every column."""
    columns = schema.names()
    validate_columns(columns, spec)
    parts = parse_template(spec.template)
    check_columns(parts, columns)
    check_scalar_fields(parts, schema)
    check_output_types(schema, spec)


def check_scalar_fields(parts: list[str | Placeholder], schema: pl.Schema) -> None:
    """A plain ``{column}`` must be a scalar; ``{column:json}`` renders anything as JSON."""
    for part in parts:
        if isinstance(part, Placeholder) and not part.as_json and is_nested(schema[part.column]):
            raise ConfigError(
                f"The prompt template uses column {part.column!r} of type "
                f"{schema[part.column]} as text: write {{{part.column}{JSON_SUFFIX}}} in the "
                "template to render it as JSON, or use a scalar column."
            )


def check_output_types(schema: pl.Schema, spec: JobSpec) -> None:
    if spec.output_format() != "csv":
        return
    nested = [name for name, dtype in schema.items() if is_nested(dtype) or dtype == pl.Binary]
    if nested:
        raise ConfigError(
            f"Input column(s) {nested} hold list, struct or binary values, which a CSV output "
            f"({spec.output or 'the default output'}) cannot hold: write a Parquet output "
            "instead (--output NAME.parquet)."
        )


def check_rows(frame: pl.DataFrame, spec: JobSpec) -> None:
    """The checks on every row of a prepared block (`check_text_only`, `check_context_window`)."""
    check_text_only(frame, spec)
    check_context_window(frame, spec)


def check_text_only(frame: pl.DataFrame, spec: JobSpec) -> None:
    """On a provider whose batch API takes text only, fail on the first row with an image,
    naming the lane that takes it (the provider's real-time twin)."""
    able, column = capabilities(spec.provider), spec.image_column
    if not able.text_only or column is None or column not in frame.columns:
        return
    image = pl.col(column).cast(pl.String)
    with_image = frame.filter(image.is_not_null() & (image.str.strip_chars() != ""))
    if with_image.height:
        row, count = with_image.row(0, named=True)[ROW_ID], with_image.height
        lane = f"--provider {able.realtime_twin}" if able.realtime_twin else "another provider"
        raise ConfigError(
            f"Row {row} has an image (--image-column {column}), and {spec.provider}'s batch API "
            f"takes text only ({count} such row(s) in this block): send the job with {lane}, "
            "whose API takes images, or drop --image-column."
        )


def check_context_window(frame: pl.DataFrame, spec: JobSpec) -> None:
    """Fail on the first row whose rendered request cannot fit the model's context window.

    ``frame`` holds the template's columns and ``ROW_ID``; tokens are estimated as in
    ``maple enrich --dry-run`` (about 4 characters per token), plus the max output tokens
    parameter when one is set.
    """
    window = context_window(spec.model, spec.provider)
    if window is None or frame.height == 0:
        return

    limits = [spec.params.get(p) for p in MAX_TOKEN_PARAMS]
    reserved = next((v for v in limits if isinstance(v, int) and not isinstance(v, bool)), 0)
    tokens = prompt_tokens_expr(spec, spec.provider) + reserved
    over = frame.select(ROW_ID, tokens.alias("_tokens")).filter(pl.col("_tokens") > window)
    if over.height:
        row, count = over.row(0, named=True), over.height
        with_output = f", including {reserved:,} max output tokens" if reserved else ""
        if not spec.kind.replies:  # the row's text alone (an embedding's)
            raise ConfigError(
                f"Row {row[ROW_ID]}'s {spec.kind.sent} is about {row['_tokens']:,} tokens, over "
                f"{spec.model}'s input limit of {window:,} tokens ({count} such row(s) in this "
                f"block). Shorten the row's text or the --{spec.kind.template_field} template."
            )
        raise ConfigError(
            f"Row {row[ROW_ID]} renders a request of about {row['_tokens']:,} tokens"
            f"{with_output}, over {spec.model}'s context window of {window:,} tokens "
            f"({count} such row(s) in this block). Shorten the row's text or the prompt, or "
            "use a model with a larger context window."
        )
