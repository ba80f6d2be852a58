"""The per-shard ``no_missing_lines`` check of ``raw_responses``: every request a shard sent is
answered or failed by class; a request whose batch said it ran every request but returned no
line for it (``missing``) is resent, and the check fails only when one stays missing with no
send to come (`maple_engine.collect.accounting`)."""

from typing import Any

import dagster as dg

from maple_assets.graph.checks import shard_check_spec
from maple_engine.collect.accounting import describe, line_figures
from maple_engine.model import LineTally

NO_MISSING_LINES = "no_missing_lines"


def shard_missing_lines_spec(key: dg.AssetKey, pdef: dg.PartitionsDefinition) -> dg.AssetCheckSpec:
    """The check's spec, one evaluation per partition as the shard is collected."""
    return shard_check_spec(
        NO_MISSING_LINES,
        key,
        pdef,
        "Every request this shard sent is answered or failed by class: none is still missing "
        "from its batch's output and error files after its last send.",
    )


def shard_missing_lines(
    key: dg.AssetKey, shard: str, info: dict[str, Any], tally: LineTally, for_good: int
) -> dg.AssetCheckEvaluation:
    """The evaluation of partition ``shard`` of a job's ``raw_responses`` (``key``): ``info`` its
    ``summarize``, ``tally`` its attempts' line tally, ``for_good`` its rows still missing
    with no send to come (`maple_engine.collect.accounting.missing_for_good`)."""
    figures = line_figures(info)
    said = describe(info)
    if tally.missing:
        said += f"; {tally.missing:,} line(s) missing from ended batches, resent"
    extra = [
        f"{count:,} {what}"
        for count, what in ((tally.duplicated, "duplicated"), (tally.unknown, "unknown"))
        if count
    ]
    if extra:
        said += f"; {' and '.join(extra)} line(s) ignored"
    if for_good:
        said += f" ({for_good:,} still missing after their last send)"
    elif figures["missing"]:
        said += f" ({figures['missing']:,} missing now, sent again)"
    return dg.AssetCheckEvaluation(
        asset_key=key,
        check_name=NO_MISSING_LINES,
        partition=shard,
        passed=for_good == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=said,
        metadata={**figures, **tally.figures(), "missing_for_good": for_good},
    )
