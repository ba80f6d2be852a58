"""What a job adds to its provider's calls, as one frozen value: the gateway's headers
(``--header``), the extra fields of the control calls (``--extra-body``), the team's accounts
(``--team`` through the team attribution map) and the early-start signal (the event a real-time
lane sets when the first request of its next attempt leaves).

A job's decorations are built and checked once where the job is bound (`decorations_for`) and
handed to the provider and its lanes, a deadline's twins included. Headers and extra fields may
hold secrets: the value's repr shows how many there are, never what they are, and nothing of it
reaches a provider's settings (its Dagster config).
"""

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.providers.attribution import (
    NOBODY,
    PROJECT_HEADER,
    Attribution,
    AttributionMap,
    TeamAttribution,
)


@dataclasses.dataclass(frozen=True, repr=False)
class CallDecorations:
    """A job's additions to its provider's calls (`decorations_for` builds it)."""

    #: Headers sent on every request besides the provider's own (a gateway's).
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Fields added to the JSON body of every control call and to the upload's form.
    extra_body: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: The accounts the job's team is attributed to (`NOBODY`: none).
    team: TeamAttribution = NOBODY
    #: Set when a request of a real-time lane's next attempt leaves (None: nobody asks).
    sending: threading.Event | None = dataclasses.field(default=None, compare=False)

    def __repr__(self) -> str:
        told = "an event" if self.sending is not None else "None"
        return (
            f"CallDecorations(headers={len(self.headers)}, extra_body={len(self.extra_body)}, "
            f"team={'set' if self.team != NOBODY else 'none'}, sending={told})"
        )

    def headers_for(self, attribution: Attribution | None) -> dict[str, str]:
        """The headers to send besides the provider's own on an API that attributes spend by
        ``attribution``: the given ones, and the team's ``OpenAI-Project`` where the API takes
        one and the given headers name none."""
        given = dict(self.headers)
        project = self.team.openai_project
        if project is None or attribution != "project-header":
            return given
        if PROJECT_HEADER.lower() in {name.lower() for name in given}:
            return given
        return given | {PROJECT_HEADER: project}


NO_DECORATIONS = CallDecorations()


def check_extra_body(
    provider: str,
    fields: Mapping[str, Any] | None,
    *,
    takes_extra_body: bool,
    control_fields: frozenset[str] = frozenset(),
) -> None:
    """Extra control-call fields go only to a provider whose control calls take them, and
    none of them is a field Maple sets itself (``control_fields``)."""
    if fields and not takes_extra_body:
        raise ConfigError(
            f"--extra-body: {provider} sends no control calls that take extra "
            "fields (only OpenAI-style batch APIs: files and batches); drop it."
        )
    taken = sorted(set(fields or {}) & control_fields)
    if taken:
        raise ConfigError(
            f"--extra-body {taken[0]}: Maple sets that field of the batch create or upload "
            "itself; drop it."
        )


def decorations_for(
    provider: str,
    *,
    takes_extra_body: bool,
    control_fields: frozenset[str] = frozenset(),
    attribution: AttributionMap,
    headers: Mapping[str, str] | None = None,
    extra_body: Mapping[str, Any] | None = None,
    team: str | None = None,
    sending: threading.Event | None = None,
) -> CallDecorations:
    """The decorations of a job on ``provider`` (its name, whether it takes extra control-call
    fields, its team attribution map): a `ConfigError` for extra fields it takes none of."""
    fields = dict(extra_body or {})
    check_extra_body(
        provider, fields, takes_extra_body=takes_extra_body, control_fields=control_fields
    )
    accounts = NOBODY if team is None else attribution.of(team)
    spelled = None if team is None else attribution.spelled_otherwise(team)
    if spelled is not None:
        raise ConfigError(
            f"--team {team}: the team attribution map names this team {spelled!r}, and teams "
            f"are matched as spelled (else the job would run unattributed); give --team {spelled}."
        )
    return CallDecorations(dict(headers or {}), fields, accounts, sending)
