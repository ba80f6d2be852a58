"""Which provider account each team's spend goes to: the team attribution map.

A JSON object (the file named by ``MAPLE_TEAM_ATTRIBUTION``, or the same text as a provider
resource's ``team_attribution`` config)::

    {"teams": {"catalog": {"openai_project": "proj_...", "anthropic_workspace": "wrkspc_...",
                           "bedrock_tags": {"team": "catalog"},
                           "gemini_labels": {"team": "catalog"}}}}

Every key of a team is optional. A job's team (``--team``, ``team=``) selects its entry; a
provider applies the part its API takes (its capabilities' ``attribution``): OpenAI's
``OpenAI-Project`` header, the API key of an Anthropic workspace, Bedrock job tags. Gemini
labels are checked and kept for an API that takes them (Vertex AI); the Gemini Developer API
Maple calls takes none. ``maple reconcile --by team`` maps the provider's per-project
(per-workspace) reports back to teams through the same map.
docs/operations.md#teams-in-the-providers-bill has the rules.
"""

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Literal

import orjson

from maple_engine.errors import ConfigError

#: How a provider's API attributes spend to a team (``ProviderCapabilities.attribution``): a
#: project header on every call (``openai_project``), the API key of a workspace
#: (``anthropic_workspace``), tags on each batch job (``bedrock_tags``), labels on each request
#: (``gemini_labels``).
Attribution = Literal["project-header", "workspace-key", "job-tags", "request-labels"]
PROJECT_HEADER = "OpenAI-Project"
ENV = "MAPLE_TEAM_ATTRIBUTION"
EXAMPLE = (
    '{"teams": {"catalog": {"openai_project": "proj_abc", "anthropic_workspace": "wrkspc_abc", '
    '"bedrock_tags": {"team": "catalog"}, "gemini_labels": {"team": "catalog"}}}}'
)
# Gemini/Vertex labels: lowercase letters, digits, '-' and '_', keys starting with a letter,
# at most 63 characters each.
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")


@dataclasses.dataclass(frozen=True)
class TeamAttribution:
    """One team's accounts at the providers (None / empty: not attributed there)."""

    openai_project: str | None = None
    anthropic_workspace: str | None = None
    bedrock_tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    gemini_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def account(self, kind: Attribution | None) -> str | None:
        """The project or workspace that ``kind``'s reports group this team's spend under."""
        if kind == "project-header":
            return self.openai_project
        if kind == "workspace-key":
            return self.anthropic_workspace
        return None


NOBODY = TeamAttribution()


@dataclasses.dataclass(frozen=True)
class AttributionMap:
    """Every team's `TeamAttribution`, by team name."""

    teams: Mapping[str, TeamAttribution] = dataclasses.field(default_factory=dict)

    def of(self, team: str) -> TeamAttribution:
        """``team``'s accounts; `NOBODY` for a team the map does not list."""
        return self.teams.get(team, NOBODY)

    def spelled_otherwise(self, team: str) -> str | None:
        """The team the map lists under another spelling of ``team`` (case, spaces), if any."""
        wanted = team.strip().casefold()
        found = [name for name in self.teams if name.strip().casefold() == wanted]
        return found[0] if found and team not in self.teams else None

    def teams_of(self, kind: Attribution | None, account: str | None) -> list[str]:
        """The teams whose spend ``kind``'s reports group under ``account``."""
        if account is None:
            return []
        return sorted(t for t, a in self.teams.items() if a.account(kind) == account)


EMPTY = AttributionMap()


def given_attribution(given: str | None) -> AttributionMap:
    """The map a setting gives: its JSON text, or the path of its file (`EMPTY` for none)."""
    if not given:
        return EMPTY
    if given.lstrip().startswith("{"):
        return parse_attribution(given, "team_attribution")
    return load_attribution(given)


def load_attribution(path: str) -> AttributionMap:
    """The map in the JSON file ``path`` (`ConfigError` naming the file and the fix)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(
            f"Cannot read the team attribution file {path} ({ENV}): {exc.strerror or exc}. "
            f"Point {ENV} at a readable JSON file like {EXAMPLE}, or unset it."
        ) from None
    return parse_attribution(text, f"The team attribution file {path} ({ENV})")


def parse_attribution(text: str | bytes, where: str = "team_attribution") -> AttributionMap:
    """The map in JSON ``text``, checked: `ConfigError` naming ``where``, the key and the fix."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not JSON ({exc}): write it like {EXAMPLE}.") from None
    return attribution_map(data, where)


def attribution_map(data: Any, where: str = "team_attribution") -> AttributionMap:
    """The map of an already parsed JSON value (see `parse_attribution`)."""
    if not isinstance(data, dict) or set(data) != {"teams"}:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ConfigError(
            f'{where} must be an object with one key, "teams" (found {found}): write it like '
            f"{EXAMPLE}."
        )
    teams = data["teams"]
    if not isinstance(teams, dict):
        raise ConfigError(f'{where}: "teams" must map team names to objects, e.g. {EXAMPLE}.')
    return AttributionMap({str(n): _team(n, t, f"{where}: team {n!r}") for n, t in teams.items()})


def _team(name: str, data: Any, where: str) -> TeamAttribution:
    if not name:
        raise ConfigError(f"{where}: a team name is empty; name each team as --team names it.")
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be an object of its accounts, e.g. {EXAMPLE}.")
    fields = {f.name for f in dataclasses.fields(TeamAttribution)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigError(
            f"{where} has unknown key(s) {', '.join(unknown)}: the keys are "
            f"{', '.join(sorted(fields))}."
        )
    for key in ("openai_project", "anthropic_workspace"):
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: {key} must be a non-empty string (an id), not {value!r}.")
    tags = _pairs(data.get("bedrock_tags"), f"{where}: bedrock_tags")
    labels = _pairs(data.get("gemini_labels"), f"{where}: gemini_labels")
    for key, value in labels.items():
        if not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(value):
            raise ConfigError(
                f"{where}: gemini_labels {key}={value!r} is not a valid label: keys and values "
                "take lowercase letters, digits, '-' and '_' (keys start with a letter), at most "
                "63 characters."
            )
    return TeamAttribution(
        data.get("openai_project"), data.get("anthropic_workspace"), tags, labels
    )


def _pairs(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(
            f'{where} must map names to string values, e.g. {{"team": "catalog"}}, not {value!r}.'
        )
    return dict(value)
