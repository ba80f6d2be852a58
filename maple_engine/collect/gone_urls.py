"""Before an ``invalid_image`` or ``invalid_file`` retry: is the row's URL still there?

A row whose image URL (``--image-column``) or file URL (an ``http(s)`` cell of a
``--file-column``) failed at the provider is checked (`maple_engine.inputs.images`) only when
the policy would send it again, so never before its first send; one whose URL is definitely gone
fails at once, marked ``resendable`` False, so no later attempt sends it. Local and S3 files
were read when the request was encoded and are not checked again.

A provider fetches a file URL as it fetches an image URL, and says so as an image's failure:
in a job whose URLs are all files' (no image column) that failure is the row's ``invalid_file``.
"""

import polars as pl

from maple_engine.collect.responses import FILE_GONE, IMAGE_GONE, combine_attempts
from maple_engine.failures import FailureClass
from maple_engine.inputs.files import URL_PREFIXES
from maple_engine.inputs.images import missing_images
from maple_engine.job import Job
from maple_engine.model import ROW_ID
from maple_engine.spec import JobSpec

URL_CLASSES = (FailureClass.INVALID_IMAGE.value, FailureClass.INVALID_FILE.value)


def as_file_failures(spec: JobSpec, results: pl.DataFrame) -> pl.DataFrame:
    """``results`` with a job's file-URL failures classed ``invalid_file``."""
    if not spec.file_columns or spec.image_column is not None:
        return results
    image = pl.col("failure_class") == FailureClass.INVALID_IMAGE.value
    file_class = pl.when(image).then(pl.lit(FailureClass.INVALID_FILE.value))
    return results.with_columns(
        file_class.otherwise(pl.col("failure_class")).alias("failure_class")
    )


def _url_cells(job: Job, shard: str, rows: pl.DataFrame) -> pl.DataFrame:
    """``ROW_ID``, ``url`` and ``gone_prefix`` of every URL the rows sent, one a line."""
    spec = job.spec
    columns = [c for c in (spec.image_column, *spec.file_columns) if c]
    frame = job.state.shard_frame(shard, columns=[ROW_ID, *dict.fromkeys(columns)])
    frame = frame.join(rows.select(ROW_ID), on=ROW_ID, how="semi")
    pieces = [
        frame.select(
            ROW_ID,
            pl.col(column).cast(pl.String).alias("url"),
            pl.lit(IMAGE_GONE if column == spec.image_column else FILE_GONE).alias("prefix"),
        )
        for column in dict.fromkeys(columns)
    ]
    cells = pl.concat(pieces).drop_nulls("url")
    is_file = pl.col("prefix") == FILE_GONE
    return cells.filter(
        ~is_file
        | pl.col("url").str.starts_with(URL_PREFIXES[0])
        | pl.col("url").str.starts_with(URL_PREFIXES[1])
    )


def check_urls(
    job: Job, shard: str, results: pl.DataFrame, earlier: list[pl.DataFrame]
) -> pl.DataFrame:
    """``results`` with the rows whose image or file URL is gone failed for good (their
    error says which URL and why), among those the policy would send again."""
    results = as_file_failures(job.spec, results)
    if not (job.spec.image_column or job.spec.file_columns) or not job.policy.check_images:
        return results
    candidates = results.filter(
        (pl.col("status") == "failed") & pl.col("failure_class").is_in(URL_CLASSES)
    )
    if candidates.is_empty():
        return results
    sends = combine_attempts([*earlier, candidates]).select(ROW_ID, "attempts", "failure_class")
    allowed = sends.filter(
        pl.Series(
            [
                job.policy.allows(c, n)
                for c, n in zip(sends["failure_class"], sends["attempts"], strict=True)
            ]
        )
    )
    if allowed.is_empty():
        return results
    cells = _url_cells(job, shard, allowed)
    gone = missing_images(cells["url"].to_list())
    problems = (
        cells.with_columns(
            pl.col("url").replace_strict(gone, default=None, return_dtype=pl.String).alias("gone")
        )
        .filter(pl.col("gone").is_not_null())
        .group_by(ROW_ID, maintain_order=True)
        .agg(pl.concat_str([pl.col("prefix"), pl.col("gone")]).first().alias("gone"))
    )
    joined = results.join(problems, on=ROW_ID, how="left", maintain_order="left")
    gone_now = pl.col("gone").is_not_null()
    return joined.with_columns(
        pl.when(gone_now).then(pl.col("gone")).otherwise(pl.col("error")).alias("error"),
        pl.when(gone_now).then(False).otherwise(pl.col("resendable")).alias("resendable"),
    ).drop("gone")
