"""``maple embed``: the job's ``embedding()``, run by ``maple enrich``'s driver."""

from maple_assets.cli.enrich import EnrichOptions, job_name
from maple_assets.factory import Enrichment, embedding


def default_output(source: str) -> str:
    """``INPUT_embedded.parquet`` beside the input (vectors need Parquet, whatever the input)."""
    stem, dot, _ = source.split("?", 1)[0].rpartition(".")
    return f"{stem if dot else source}_embedded.parquet"


def build_embedding(opts: EnrichOptions) -> Enrichment:
    """The job's embedding: the options as given, names filled in."""
    job = dict(opts.job)
    job.pop("kind")
    job |= {
        "name": job_name(opts, None),
        "output": job["output"] or default_output(opts.input_path),
        "deadline": job.pop("deadline_s"),
    }
    return embedding(source=opts.input_path, **job)
