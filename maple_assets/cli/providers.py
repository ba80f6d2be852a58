"""``maple providers``: every ``--provider`` name and what it is, from the engine's registry
(`maple_engine.providers.registry.describe`); ``--format markdown`` writes docs/providers.md."""

import dataclasses
import json
from collections.abc import Sequence

import click

from maple_assets.cli.tables import render
from maple_engine.providers.registry import ProviderInfo, describe

HEADER = (
    "name",
    "family",
    "kinds",
    "files",
    "lanes",
    "discount",
    "requests",
    "bytes",
    "retention",
    "env",
)
REGENERATE = "maple providers --format markdown > docs/providers.md"

_INTRO = f"""# Providers

Every `--provider` name, from the provider registry (`maple_engine/providers/registry.py`).
Regenerate it with `{REGENERATE}`
(a unit test fails while this file differs from what that prints). `maple providers` prints the
same as a table, `maple providers --format json` as a JSON list of objects with the keys below
(here discounts show as percentages, sizes in the MB or MiB the provider documents, retention
in days or hours; `-` is JSON's null).
"""

_LEGEND = (
    ("`name`", "the `--provider` value (`enrichment(provider=...)`)"),
    (
        "`family`",
        "whose API and credentials it speaks: the names of one family read the same API key and "
        "base URL and bill to the same account (`openai-compatible`: an OpenAI-compatible API "
        "you name with `MAPLE_BASE_URL`; `bedrock`: the AWS account of boto3's chain; "
        "`emulator`: the local emulator, no key)",
    ),
    ("`kinds`", "`chat` (`maple enrich`) and/or `embeddings` (`maple embed`)"),
    (
        "`files`",
        "the files a chat job may send it with `--file-column`: `pdf`, `image` (PNG, JPEG, "
        "WebP, GIF), `audio` (WAV, MP3); `-`: none, the job is refused before anything is read",
    ),
    (
        "`lanes`",
        "the lane the name itself sends on, then those a `--deadline` takes through its twins: "
        "`batch` (a provider batch API), `realtime` (one request per row at the standard "
        "price), `flex` (real time billed at batch prices), `priority` (real time on a faster, "
        "dearer tier)",
    ),
    (
        "`batch_discount`",
        "the share taken off the real-time price (0.5: half price, 0.25: 25% off) where the "
        "price source publishes no batch rates of a model; null for a name that is not "
        "batch-priced (standard real time, priority)",
    ),
    (
        "`max_requests_per_batch`, `max_batch_bytes`",
        "most requests and bytes per batch file; for a real-time name, per shard attempt (the "
        "rows one attempt of a shard sends)",
    ),
    (
        "`results_retention_s`",
        "how long the provider keeps a finished batch's results downloadable, in seconds; null "
        "where it documents no end, and for real-time names (their answers are checkpointed as "
        "they come)",
    ),
    (
        "`env`",
        "the environment variables read for it: API key, base URL, API version, admin key "
        "(`maple reconcile`), workspace keys, Bedrock's role and boto3's chain, the emulator's "
        "URL. Those every provider shares (`MAPLE_STORAGE`, `MAPLE_COST_DB`, "
        "`MAPLE_TEAM_ATTRIBUTION`) are in [operations](operations.md#environment-variables)",
    ),
)


@click.command("providers")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
    help="A readable table, a JSON list of objects, or the Markdown of docs/providers.md.",
)
def providers_command(output_format: str) -> None:
    """Every --provider name: its family, kinds, files, lanes, batch discount, limits per batch, how
    long its batch results stay downloadable, and the environment variables it reads."""
    infos = describe()
    if output_format == "json":
        click.echo(json.dumps([info.as_json() for info in infos], indent=2))
    elif output_format == "markdown":
        click.echo(markdown(infos), nl=False)
    else:
        click.echo(render(HEADER, [_cells(info) for info in infos], align="l" * len(HEADER)))


def markdown(infos: Sequence[ProviderInfo]) -> str:
    """docs/providers.md: the introduction, one table row per name, the legend."""
    head = "| `" + "` | `".join(_json_keys()) + "` |"
    rule = "|" + "---|" * len(_json_keys())
    rows = ["| " + " | ".join(_markdown_cells(info)) + " |" for info in infos]
    legend = [f"| {key} | {meaning} |" for key, meaning in _LEGEND]
    return "\n".join([_INTRO, head, rule, *rows, "", "| key | meaning |", "|---|---|", *legend, ""])


def _json_keys() -> list[str]:
    return [field.name for field in dataclasses.fields(ProviderInfo)]


def _cells(info: ProviderInfo) -> list[str]:
    return [
        info.name,
        info.family,
        ",".join(info.kinds),
        ",".join(info.files) or "-",
        ",".join(info.lanes),
        _percent(info.batch_discount),
        f"{info.max_requests_per_batch:,}",
        _bytes(info.max_batch_bytes),
        _duration(info.results_retention_s),
        " ".join(info.env) or "-",
    ]


def _markdown_cells(info: ProviderInfo) -> list[str]:
    cells = _cells(info)
    cells[0] = f"`{info.name}`"
    cells[2], cells[3] = ", ".join(info.kinds), ", ".join(info.files) or "-"
    cells[4] = ", ".join(info.lanes)
    cells[-1] = ", ".join(f"`{name}`" for name in info.env) or "-"
    return cells


def _percent(discount: float | None) -> str:
    return "-" if discount is None else f"{discount:.0%}"


def _bytes(size: int) -> str:
    """``200 MB``, ``256 MiB``: the unit the provider documents its limit in."""
    for unit, name in ((1024**3, "GiB"), (1024**2, "MiB"), (1000**3, "GB"), (1000**2, "MB")):
        if size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size:,} B"


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    days, rest = divmod(seconds, 86400)
    return f"{days} d" if days > 1 and not rest else f"{seconds // 3600} h"
